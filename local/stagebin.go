package local

const (
	// EnvSandboxBin names the sbx-sandbox binary the local sandbox's
	// processes run (an absolute path); unset, sbx looks beside its own
	// executable (stagebin_linux.go).
	EnvSandboxBin = "SBX_SANDBOX_BIN"
	// SandboxBinName is that binary's name beside sbx (cmd/sbx-sandbox).
	SandboxBinName = "sbx-sandbox"
)
