package egress

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// TestCASignsOnlyListedNames: the session CA's name constraints hold for a
// client that checks them (as TLS clients do), so even its key, were it to
// leak, signs nothing a client would trust but the listed names: not
// another host, and not a name below a listed one (X.509's permitted
// "api.example.com" alone would allow "x.api.example.com").
func TestCASignsOnlyListedNames(t *testing.T) {
	ca, err := NewCA([]string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(ca.CertPEM())
	root, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(root)
	for name, ok := range map[string]bool{
		"api.example.com":     true,
		"x.api.example.com":   false,
		"a.b.api.example.com": false,
		"example.com":         false,
		"evil.com":            false,
		"apiexample.com":      false,
	} {
		leaf, err := ca.Leaf(name) // signs anything: what a leaked key could do
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(leaf.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots})
		if ok && err != nil {
			t.Errorf("%s: the listed name does not verify: %v", name, err)
		}
		if !ok && err == nil {
			t.Errorf("%s: a certificate the CA signed for it verifies; the CA may sign only api.example.com", name)
		}
	}
}
