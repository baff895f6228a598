// Pinned build of the agent-sandbox v0.5.6 controller the e2e harness runs (see ../build.sh):
// CRDs serving v1beta1 (storage) and v1alpha1, with a conversion webhook.
module sbx.test/e2e/asbuild056

go 1.26.0

require sigs.k8s.io/agent-sandbox v0.5.6
