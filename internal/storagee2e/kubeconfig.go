package storagee2e

import (
	"net/http"
	"net/url"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigFor is a kubeconfig of one context that reaches the cluster as
// cfg does, for the e2e test binary, which reads a kubeconfig file only:
// cfg is the result of every kubeconfig flag (--context, --server,
// --token, --as, ...), which the binary would not understand.
func kubeconfigFor(cfg *rest.Config) *clientcmdapi.Config {
	const name = "storage-e2e"
	c := clientcmdapi.NewConfig()
	c.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
		TLSServerName:            cfg.ServerName,
		DisableCompression:       cfg.DisableCompression,
		ProxyURL:                 proxyURL(cfg),
	}
	c.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateUID:        cfg.Impersonate.UID,
		ImpersonateGroups:     cfg.Impersonate.Groups,
		ImpersonateUserExtra:  cfg.Impersonate.Extra,
		Exec:                  cfg.ExecProvider,
		AuthProvider:          cfg.AuthProvider,
	}
	c.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	c.CurrentContext = name
	return c
}

// proxyURL is the proxy cfg reaches its API server through (--proxy-url,
// or the kubeconfig's proxy-url), asked of cfg.Proxy; "" for none, or for
// a proxy chosen otherwise (the environment's: the suite reads it too).
func proxyURL(cfg *rest.Config) string {
	if cfg.Proxy == nil {
		return ""
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return ""
	}
	p, err := cfg.Proxy(&http.Request{URL: u})
	if err != nil || p == nil {
		return ""
	}
	return p.String()
}

// writeKubeconfig writes kubeconfigFor(cfg) to path, readable by its owner
// only: it may hold credentials.
func writeKubeconfig(path string, cfg *rest.Config) error {
	data, err := clientcmd.Write(*kubeconfigFor(cfg))
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
