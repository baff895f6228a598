package local

// stateFile is the name of a sandbox's state in its session's state
// directory (the init's pid, socket and host ids). It is named on every
// system so that the tests, which read it, build everywhere.
const stateFile = "local.json"
