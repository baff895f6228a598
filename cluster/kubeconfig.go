package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigOptions are the inputs of ServiceAccountKubeconfig.
type KubeconfigOptions struct {
	Namespace      string        // default "sbx"
	ServiceAccount string        // default "sbx" (cluster/deploy/rbac.yaml)
	Duration       time.Duration // token lifetime, default 24h (the API server may shorten it)
	// Server overrides the API server address written (default: the
	// admin config's).
	Server string
}

// ServiceAccountKubeconfig asks the API server for a token of the service
// account (TokenRequest API, so nothing long-lived is stored in the cluster)
// and returns a kubeconfig that uses it, with the server and CA of rc (an
// operator's admin config). The result is what AGENT_SANDBOX_KUBECONFIG
// should point to.
func ServiceAccountKubeconfig(ctx context.Context, kube kubernetes.Interface, rc *rest.Config, o KubeconfigOptions) ([]byte, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = "sbx"
	}
	if o.Duration <= 0 {
		o.Duration = 24 * time.Hour
	}
	secs := int64(o.Duration / time.Second)
	tr, err := kube.CoreV1().ServiceAccounts(o.Namespace).CreateToken(ctx, o.ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return nil, apiError(err, rc.Host, "create", "serviceaccounts/token", o.Namespace)
	}
	server := o.Server
	if server == "" {
		server = rc.Host
	}
	cluster := &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: rc.Insecure, TLSServerName: rc.ServerName}
	switch {
	case len(rc.CAData) > 0:
		cluster.CertificateAuthorityData = rc.CAData
	case rc.CAFile != "":
		ca, err := os.ReadFile(rc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the cluster CA: %w", err)
		}
		cluster.CertificateAuthorityData = ca
	}
	name := "sbx"
	user := fmt.Sprintf("system:serviceaccount:%s:%s", o.Namespace, o.ServiceAccount)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = cluster
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: o.Namespace}
	cfg.CurrentContext = name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, err
	}
	if tr.Status.Token == "" {
		return nil, errors.New("the API server returned an empty token")
	}
	return b, nil
}
