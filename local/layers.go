package local

// Layer is one isolation layer of the local backend, as a real sandbox got
// it: `sbx doctor` prints one line per layer.
type Layer struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
	// Detail says what the layer is in this sandbox when active (the host
	// uid, the controllers), and why it is missing when not.
	Detail string `json:"detail"`
}
