package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Injection adds one header to the requests to one host. Its value is read
// on the host at request time, from an environment variable or a file, and
// never given to the sandbox.
type Injection struct {
	Host   string `json:"host"` // canonical name
	Port   int    `json:"port"` // 0 means 443
	Header string `json:"header"`
	// Prefix goes before the value ("Bearer ").
	Prefix string `json:"prefix,omitempty"`
	// Env or File holds the value (one of them).
	Env  string `json:"env,omitempty"`
	File string `json:"file,omitempty"`
}

// MaxInjectValue bounds a header value read from a file.
const MaxInjectValue = 16 << 10

// Value reads the injection's value now.
func (in Injection) Value() (string, error) {
	var v string
	switch {
	case in.Env != "":
		var ok bool
		v, ok = os.LookupEnv(in.Env)
		if !ok || v == "" {
			return "", fmt.Errorf("inject for %s: the host environment variable %s is not set (sbx reads it at each request)", in.Host, in.Env)
		}
	case in.File != "":
		f, err := os.Open(in.File)
		if err != nil {
			return "", fmt.Errorf("inject for %s: read the value file: %v", in.Host, err)
		}
		defer f.Close()
		buf := make([]byte, MaxInjectValue+1)
		n, _ := f.Read(buf)
		if n > MaxInjectValue {
			return "", fmt.Errorf("inject for %s: the value file %s is over %d bytes", in.Host, in.File, MaxInjectValue)
		}
		v = strings.TrimRight(string(buf[:n]), "\r\n")
	default:
		return "", fmt.Errorf("inject for %s: neither env nor file names the value", in.Host)
	}
	v = in.Prefix + v
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", fmt.Errorf("inject for %s: the value holds a line break or NUL, which a header cannot", in.Host)
	}
	return v, nil
}

// Injector holds the injections, by host.
type Injector struct {
	list []Injection
}

// NewInjector checks the injections against the allowlist: each host must
// be allowed by a name rule on its port (an inject for a host the proxy
// would refuse is a configuration error, not a silent no-op).
func NewInjector(list []Injection, allow *Allowlist) (*Injector, error) {
	in := &Injector{}
	for _, x := range list {
		name, err := CanonicalName(x.Host)
		if err != nil {
			return nil, fmt.Errorf("inject host %q: %v", x.Host, err)
		}
		x.Host = name
		if x.Port == 0 {
			x.Port = 443
		}
		if x.Port < 1 || x.Port > 65535 {
			return nil, fmt.Errorf("inject for %s: port %d is out of range (1 to 65535)", name, x.Port)
		}
		if x.Header == "" || !validHeaderName(x.Header) {
			return nil, fmt.Errorf("inject for %s: %q is not a header name", name, x.Header)
		}
		if (x.Env == "") == (x.File == "") {
			return nil, fmt.Errorf("inject for %s: give exactly one of env (a host variable) or file (a host file) for the value", name)
		}
		if allow == nil || !allow.AllowsName(name, x.Port) {
			return nil, fmt.Errorf("inject for %s: the host is not in allow_net on port %d; add it there too", name, x.Port)
		}
		in.list = append(in.list, x)
	}
	return in, nil
}

func validHeaderName(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return h != ""
}

// Hosts are the hosts with an injection (the names the CA may sign).
func (in *Injector) Hosts() []string {
	var out []string
	for _, x := range in.list {
		out = append(out, x.Host)
	}
	return out
}

// Has reports whether requests to host:port get a header.
func (in *Injector) Has(host string, port int) bool {
	name, err := CanonicalName(host)
	if err != nil {
		return false
	}
	for _, x := range in.list {
		if x.Host == name && x.Port == port {
			return true
		}
	}
	return false
}

// Apply sets the headers for host:port in h, replacing what the sandbox
// sent under those names (a placeholder token, say).
func (in *Injector) Apply(host string, port int, h http.Header) error {
	for _, x := range in.list {
		if x.Host != host || x.Port != port {
			continue
		}
		v, err := x.Value()
		if err != nil {
			return err
		}
		h.Set(x.Header, v)
	}
	return nil
}

// CA is a per-session certificate authority for the inject hosts: its key
// lives in this process only; its certificate, constrained to those hosts,
// is what the sandbox trusts.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA makes a CA that may sign only names (constrained by X.509 name
// constraints, which TLS clients check).
func NewCA(names []string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	// X.509's "api.example.com" also permits every name below it; the
	// exclusion ".api.example.com" (subdomains only) takes those back, so
	// the CA can sign exactly the listed names.
	var below []string
	for _, n := range names {
		below = append(below, "."+n)
	}
	tpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sbx session CA (inject)", Organization: []string{"sbx"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         names,
		ExcludedDNSDomains:          below,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("make the session CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the CA's certificate (never its key), for the sandbox's trust
// store.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.pem...) }

// Leaf returns a server certificate for name, made once.
func (ca *CA) Leaf(name string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[name]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key}
	ca.leaves[name] = c
	return c, nil
}

// MarshalKey is the CA's private key (PKCS #8 DER), to hand to the proxy's
// process over a pipe; it is never written to a file.
func (ca *CA) MarshalKey() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(ca.key) }

// LoadCA is a CA from its certificate (PEM) and MarshalKey's output.
func LoadCA(certPEM, keyDER []byte) (*CA, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return nil, fmt.Errorf("session CA: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("session CA: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("session CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("session CA key: not an ECDSA key")
	}
	return &CA{cert: cert, key: key, pem: append([]byte(nil), certPEM...), leaves: map[string]*tls.Certificate{}}, nil
}
