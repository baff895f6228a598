package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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

// api is a connection to one cluster, with the versions chosen.
type api struct {
	server string
	rest   *rest.Config
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	ext    string // chosen version of the extensions group
	core   string // chosen version of the core group
	// spdyOnly is set once the server refused a WebSocket exec.
	spdyOnly atomic.Bool
}

func (a *api) claims(ns string) dynamic.ResourceInterface {
	return a.dyn.Resource(schema.GroupVersionResource{Group: GroupExtensions, Version: a.ext, Resource: "sandboxclaims"}).Namespace(ns)
}

func (a *api) pools(ns string) dynamic.ResourceInterface {
	return a.dyn.Resource(schema.GroupVersionResource{Group: GroupExtensions, Version: a.ext, Resource: "sandboxwarmpools"}).Namespace(ns)
}

func (a *api) templates(ns string) dynamic.ResourceInterface {
	return a.dyn.Resource(schema.GroupVersionResource{Group: GroupExtensions, Version: a.ext, Resource: "sandboxtemplates"}).Namespace(ns)
}

func (a *api) sandboxes(ns string) dynamic.ResourceInterface {
	return a.dyn.Resource(schema.GroupVersionResource{Group: GroupCore, Version: a.core, Resource: "sandboxes"}).Namespace(ns)
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
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, &KubeconfigError{Path: cfg.KubeconfigPath(), Err: err}
	}
	return newAPI(rc, kube, dyn, kube.Discovery())
}

func newAPI(rc *rest.Config, kube kubernetes.Interface, dyn dynamic.Interface, d discovery.DiscoveryInterface) (*api, error) {
	server := ""
	if rc != nil {
		server = rc.Host
	}
	served, err := discoverServed(d)
	if err != nil {
		return nil, apiError(err, server, "discover", "API groups", "")
	}
	a := &api{server: server, rest: rc, kube: kube, dyn: dyn}
	var ok1, ok2 bool
	a.ext, ok1 = chooseVersion(served.Extensions)
	a.core, ok2 = chooseVersion(served.Core)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w (served: %s %v, %s %v; sbx speaks %v)", ErrCRDsMissing,
			GroupExtensions, served.Extensions, GroupCore, served.Core, knownVersions)
	}
	return a, nil
}

var getOpts = metav1.GetOptions{}

func dynamicFor(rc *rest.Config) (dynamic.Interface, error) { return dynamic.NewForConfig(rc) }
