package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	coreclient "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned"
	extclient "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"
)

// agent-sandbox's API groups. Claims, pools and templates are in the
// extensions group; Sandboxes in the core group.
const (
	GroupExtensions = "extensions.agents.x-k8s.io"
	GroupCore       = "agents.x-k8s.io"
)

// knownVersions are the versions this package speaks, most preferred first.
// v1alpha1 claims name the pool's sandboxTemplateRef; v1beta1 claims name
// the warmPoolRef.
var knownVersions = []string{"v1beta1", "v1alpha1"}

// chooseVersion picks the version to use from those a group serves: the
// first of knownVersions that is served.
func chooseVersion(served []string) (string, bool) {
	for _, v := range knownVersions {
		if slices.Contains(served, v) {
			return v, true
		}
	}
	return "", false
}

// Served is what the cluster serves of agent-sandbox.
type Served struct {
	Extensions []string // versions of extensions.agents.x-k8s.io
	Core       []string // versions of agents.x-k8s.io
}

// discoverServed asks the discovery API which versions of agent-sandbox's
// groups the cluster serves.
func discoverServed(d discovery.DiscoveryInterface) (Served, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return Served{}, err
	}
	var s Served
	for _, g := range groups.Groups {
		var vs []string
		for _, v := range g.Versions {
			vs = append(vs, v.Version)
		}
		switch g.Name {
		case GroupExtensions:
			s.Extensions = vs
		case GroupCore:
			s.Core = vs
		}
	}
	return s, nil
}

// api is a connection to one cluster, with the versions chosen. The
// agent-sandbox resources are reached through agent-sandbox's own typed
// clientsets, in the chosen version (claims.go, typed.go).
type api struct {
	server string
	rest   *rest.Config
	kube   kubernetes.Interface
	ext    string // chosen version of the extensions group
	core   string // chosen version of the core group
	// extAPI speaks the extensions group (claims, pools, templates) in
	// version ext; sbs reads Sandboxes in version core.
	extAPI
	sbs sandboxGetter
	// spdyOnly is set once the server refused a WebSocket exec.
	spdyOnly atomic.Bool
}

// connect builds the clients for cfg and discovers the versions to use.
func connect(ctx context.Context, cfg Config) (*api, error) {
	rc, err := cfg.RESTConfig()
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, &KubeconfigError{Path: cfg.KubeconfigPath(), Err: err}
	}
	ext, core, err := agentClients(rc)
	if err != nil {
		return nil, &KubeconfigError{Path: cfg.KubeconfigPath(), Err: err}
	}
	return newAPI(rc, kube, ext, core, kube.Discovery())
}

// agentClients are agent-sandbox's typed clientsets for rc.
func agentClients(rc *rest.Config) (extclient.Interface, coreclient.Interface, error) {
	ext, err := extclient.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	core, err := coreclient.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return ext, core, nil
}

func newAPI(rc *rest.Config, kube kubernetes.Interface, ext extclient.Interface, core coreclient.Interface, d discovery.DiscoveryInterface) (*api, error) {
	server := ""
	if rc != nil {
		server = rc.Host
	}
	served, err := discoverServed(d)
	if err != nil {
		return nil, apiError(err, server, "discover", "API groups", "")
	}
	a := &api{server: server, rest: rc, kube: kube}
	var ok1, ok2 bool
	a.ext, ok1 = chooseVersion(served.Extensions)
	a.core, ok2 = chooseVersion(served.Core)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w (served: %s %v, %s %v; sbx speaks %v)", ErrCRDsMissing,
			GroupExtensions, served.Extensions, GroupCore, served.Core, knownVersions)
	}
	if ext != nil {
		a.extAPI = newExtAPI(a.ext, ext)
	}
	if core != nil {
		a.sbs = newSandboxGetter(a.core, core)
	}
	return a, nil
}

var getOpts = metav1.GetOptions{}
