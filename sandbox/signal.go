package sandbox

import "strconv"

// signalNames are Linux's signal numbers (amd64 and arm64, where sandboxes
// run), whatever the host's own are.
var signalNames = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
	9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
	16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU",
	23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO",
	30: "SIGPWR", 31: "SIGSYS",
}

// SignalName names signal n of a sandboxed command as Result.Signal does on
// every backend: "SIGKILL" for 9, "signal 34" for one without a name.
func SignalName(n int) string {
	if n > 0 && n < len(signalNames) {
		return signalNames[n]
	}
	return "signal " + strconv.Itoa(n)
}
