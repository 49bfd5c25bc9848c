package doctor

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// apiClient makes authenticated GETs to the API server of a kubeconfig's
// current context: client certificate and key, bearer token (or token
// file), or basic auth, and the cluster's CA. It is all doctor needs, and
// keeps client-go out of the binary.
type apiClient struct {
	server  string // https://host:port, without a trailing slash
	tls     *tls.Config
	timeout time.Duration
	token   string
	user    string
	pass    string
}

// kubeconfigError is a kubeconfig that cannot be used; it names the file,
// the rule and the fix.
func kubeconfigError(path, rule, fix string) error {
	return badOption("kubeconfig", path, rule, fix)
}

// newAPIClient reads the kubeconfig at path. A file the kubeconfig refers to
// by an absolute path that does not exist here is looked up under hostRoot
// (the kubelet's kubeconfig names host paths such as /var/lib/kubelet/pki/...).
func newAPIClient(path, hostRoot string, timeout time.Duration) (*apiClient, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, kubeconfigError(path, fmt.Sprintf("cannot be read: %v", err), "pass a readable kubeconfig, e.g. --kubeconfig=/etc/kubernetes/kubelet.conf")
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, kubeconfigError(path, "does not parse: "+err.Error(), "pass a kubeconfig as kubectl writes it")
	}
	ctxName := kc.CurrentContext
	if ctxName == "" {
		return nil, kubeconfigError(path, "has no current-context", "set one: kubectl config use-context NAME --kubeconfig "+path)
	}
	context := named(kc.Contexts, ctxName)
	if context == nil {
		return nil, kubeconfigError(path, fmt.Sprintf("has no context %q (its current-context)", ctxName), "fix current-context")
	}
	cluster := named(kc.Clusters, context.Value.Cluster)
	if cluster == nil {
		return nil, kubeconfigError(path, fmt.Sprintf("has no cluster %q (of context %q)", context.Value.Cluster, ctxName), "fix the context's cluster")
	}
	userName := context.Value.User
	user := &kubeconfigUser{} // anonymous
	if u := named(kc.Users, userName); u != nil {
		user = &u.Value
	}
	dir := filepath.Dir(path)
	read := func(what, dataKey, data, fileKey, f string) ([]byte, error) {
		if v := data; v != "" {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return nil, kubeconfigError(path, fmt.Sprintf("%s: %s is not base64: %v", what, dataKey, err), "fix "+dataKey)
			}
			return b, nil
		}
		if f != "" {
			b, err := os.ReadFile(resolve(f, dir, hostRoot))
			if err != nil {
				return nil, kubeconfigError(path, fmt.Sprintf("%s: %s %s cannot be read: %v", what, fileKey, f, err), "run doctor as root on the node, or fix "+fileKey)
			}
			return b, nil
		}
		return nil, nil
	}

	server := strings.TrimRight(cluster.Value.Server, "/")
	if u, err := url.Parse(server); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, kubeconfigError(path, fmt.Sprintf("cluster server %q is not an https:// URL", server), "fix the cluster's server")
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cluster.Value.TLSServerName,
		InsecureSkipVerify: cluster.Value.InsecureSkipTLSVerify}
	ca, err := read("cluster "+cluster.Name, "certificate-authority-data", cluster.Value.CertificateAuthorityData,
		"certificate-authority", cluster.Value.CertificateAuthority)
	if err != nil {
		return nil, err
	}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, kubeconfigError(path, "the cluster's certificate authority holds no PEM certificate", "fix certificate-authority(-data)")
		}
		tlsConf.RootCAs = pool
	}
	for k, set := range map[string]bool{"exec": user.Exec != nil, "auth-provider": user.AuthProvider != nil} {
		if set {
			return nil, kubeconfigError(path, fmt.Sprintf("user %q authenticates with %s, which doctor does not run (it links no client-go)", userName, k),
				"use a kubeconfig with a client certificate or a token (e.g. the kubelet's, /etc/kubernetes/kubelet.conf), "+
					"or, from a workstation, the kubectl plugin, which runs exec and auth-provider users: kubectl csi-registrar status")
		}
	}
	cert, err := read("user "+userName, "client-certificate-data", user.ClientCertificateData, "client-certificate", user.ClientCertificate)
	if err != nil {
		return nil, err
	}
	key, err := read("user "+userName, "client-key-data", user.ClientKeyData, "client-key", user.ClientKey)
	if err != nil {
		return nil, err
	}
	if cert != nil || key != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, kubeconfigError(path, "the user's client certificate and key do not load: "+err.Error(), "fix client-certificate(-data) and client-key(-data)")
		}
		tlsConf.Certificates = []tls.Certificate{pair}
	}
	c := &apiClient{server: server, tls: tlsConf, timeout: timeout, token: user.Token, user: user.Username, pass: user.Password}
	if f := user.TokenFile; c.token == "" && f != "" {
		b, err := os.ReadFile(resolve(f, dir, hostRoot))
		if err != nil {
			return nil, kubeconfigError(path, fmt.Sprintf("tokenFile %s cannot be read: %v", f, err), "fix tokenFile")
		}
		c.token = strings.TrimSpace(string(b))
	}
	return c, nil
}

// resolve finds a file a kubeconfig refers to: relative to the kubeconfig's
// directory, and an absolute host path under hostRoot when it is not here.
func resolve(f, dir, hostRoot string) string {
	if !filepath.IsAbs(f) {
		return filepath.Join(dir, f)
	}
	if hostRoot != "" {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(hostRoot, f)
		}
	}
	return f
}

// kubeconfig holds the fields of a kubeconfig (clientcmd's v1 Config) that
// doctor uses, decoded by a YAML library: every form kubectl reads works
// (block scalars, flow style, anchors, JSON).
type kubeconfig struct {
	CurrentContext string      `yaml:"current-context"`
	Contexts       []kcContext `yaml:"contexts"`
	Clusters       []kcCluster `yaml:"clusters"`
	Users          []kcUser    `yaml:"users"`
}

// kcName is the name of an entry of a kubeconfig's lists.
type kcName struct {
	Name string `yaml:"name"`
}

func (n kcName) name() string { return n.Name }

type kcContext struct {
	kcName `yaml:",inline"`
	Value  struct {
		Cluster string `yaml:"cluster"`
		User    string `yaml:"user"`
	} `yaml:"context"`
}

type kcCluster struct {
	kcName `yaml:",inline"`
	Value  struct {
		Server                   string `yaml:"server"`
		TLSServerName            string `yaml:"tls-server-name"`
		InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
		CertificateAuthority     string `yaml:"certificate-authority"`
		CertificateAuthorityData string `yaml:"certificate-authority-data"`
	} `yaml:"cluster"`
}

type kcUser struct {
	kcName `yaml:",inline"`
	Value  kubeconfigUser `yaml:"user"`
}

// kubeconfigUser is a kubeconfig's user (clientcmd's v1 AuthInfo).
type kubeconfigUser struct {
	ClientCertificate     string `yaml:"client-certificate"`
	ClientCertificateData string `yaml:"client-certificate-data"`
	ClientKey             string `yaml:"client-key"`
	ClientKeyData         string `yaml:"client-key-data"`
	Token                 string `yaml:"token"`
	TokenFile             string `yaml:"tokenFile"`
	Username              string `yaml:"username"`
	Password              string `yaml:"password"`
	// Exec and AuthProvider are only noticed: doctor refuses them.
	Exec         any `yaml:"exec"`
	AuthProvider any `yaml:"auth-provider"`
}

// named returns the entry of a kubeconfig list called name, or nil.
func named[E interface{ name() string }](list []E, name string) *E {
	for i := range list {
		if list[i].name() == name {
			return &list[i]
		}
	}
	return nil
}
