package sandbox

// The sandbox's file-system layout, as every backend builds it and the
// engine relies on it. It lives here, in the contract both sides import,
// so that the local backend's mounts, the in-pod helper, the cluster's
// upload and the engine's environment and stubs name the same paths.
const (
	// Home is the sandbox user's home directory (HOME of every command).
	Home = "/home/sbx"
	// StubDir holds the host-command stubs; it is first on every command's
	// PATH, so a listed host command run in the sandbox finds its stub.
	StubDir = "/tmp/.sbx-bin"
	// RunDir holds sbx's own files inside the sandbox: the in-pod helper
	// binary, its pid files and its sync state.
	RunDir = "/tmp/.sbx"
	// HelperPath is where the in-pod helper is uploaded.
	HelperPath = RunDir + "/sbx"
)
