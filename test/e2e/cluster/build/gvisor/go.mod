// Pinned build of gVisor's runsc and containerd-shim-runsc-v1 for the e2e pool's RuntimeClass gvisor
// (see ../build.sh). The proxy serves gVisor's "go" branch as pseudo-versions.
module sbx.test/e2e/gvisorbuild

go 1.26.3

require gvisor.dev/gvisor v0.0.0-20260905035102-160fafc42237
