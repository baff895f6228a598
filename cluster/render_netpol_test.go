package cluster

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// --deny-egress / --egress-cidr: a NetworkPolicy for the tenant's pods that
// allows DNS and the listed CIDRs only, decoded as Kubernetes would.
func TestRenderPoolNetworkPolicy(t *testing.T) {
	b, err := RenderPool(PoolOptions{Tenant: "t", Image: "busybox"})
	if err != nil || strings.Contains(string(b), "NetworkPolicy") {
		t.Fatalf("a NetworkPolicy without asking: %v", err)
	}
	b, err = RenderPool(PoolOptions{Tenant: "t", Image: "busybox", EgressCIDRs: []string{"10.0.5.7/32", "fd00::/64"}})
	if err != nil {
		t.Fatal(err)
	}
	docs := decodeDocs(t, b)
	if len(docs) != 3 || docs[2]["kind"] != "NetworkPolicy" {
		t.Fatalf("documents %d, last %v", len(docs), docs[len(docs)-1]["kind"])
	}
	j, _ := yaml.Marshal(docs[2])
	var np networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(j, &np); err != nil {
		t.Fatalf("not a NetworkPolicy: %v", err)
	}
	if np.Spec.PodSelector.MatchLabels["sbx.dev/tenant"] != "t" || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress {
		t.Fatalf("selector/policy types: %+v", np.Spec)
	}
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 2 {
		t.Fatalf("rules: %+v", np.Spec)
	}
	dns := np.Spec.Egress[0]
	if len(dns.Ports) != 2 || dns.Ports[0].Port.IntValue() != 53 || dns.To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" {
		t.Fatalf("dns rule: %+v", dns)
	}
	cidrs := np.Spec.Egress[1]
	if len(cidrs.To) != 2 || cidrs.To[0].IPBlock.CIDR != "10.0.5.7/32" || cidrs.To[1].IPBlock.CIDR != "fd00::/64" || len(cidrs.Ports) != 0 {
		t.Fatalf("cidr rule: %+v", cidrs)
	}
	b, err = RenderPool(PoolOptions{Tenant: "t", Image: "busybox", DenyEgress: true})
	if err != nil || len(decodeDocs(t, b)) != 3 || strings.Contains(string(b), "ipBlock") {
		t.Fatalf("--deny-egress alone: %v\n%s", err, b)
	}
	if _, err := RenderPool(PoolOptions{Tenant: "t", Image: "busybox", EgressCIDRs: []string{"10.0.0.1"}}); err == nil || !strings.Contains(err.Error(), "--egress-cidr") {
		t.Fatalf("a bad CIDR: %v", err)
	}
}
