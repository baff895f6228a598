// Pinned build of the agent-sandbox controller the e2e harness runs (see ../build.sh).
module sbx.test/e2e/asbuild

go 1.24.4

require sigs.k8s.io/agent-sandbox v0.1.1
