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
	doc, err := parseYAML(data)
	if err != nil {
		return nil, kubeconfigError(path, "does not parse: "+err.Error(), "pass a kubeconfig as kubectl writes it")
	}
	kc, _ := doc.(map[string]any)
	ctxName := str(kc["current-context"])
	if ctxName == "" {
		return nil, kubeconfigError(path, "has no current-context", "set one: kubectl config use-context NAME --kubeconfig "+path)
	}
	context := named(kc["contexts"], ctxName, "context")
	if context == nil {
		return nil, kubeconfigError(path, fmt.Sprintf("has no context %q (its current-context)", ctxName), "fix current-context")
	}
	cluster := named(kc["clusters"], str(context["cluster"]), "cluster")
	if cluster == nil {
		return nil, kubeconfigError(path, fmt.Sprintf("has no cluster %q (of context %q)", str(context["cluster"]), ctxName), "fix the context's cluster")
	}
	user := named(kc["users"], str(context["user"]), "user")
	if user == nil {
		user = map[string]any{} // anonymous
	}
	dir := filepath.Dir(path)
	read := func(what string, m map[string]any, dataKey, fileKey string) ([]byte, error) {
		if v := str(m[dataKey]); v != "" {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return nil, kubeconfigError(path, fmt.Sprintf("%s: %s is not base64: %v", what, dataKey, err), "fix "+dataKey)
			}
			return b, nil
		}
		if f := str(m[fileKey]); f != "" {
			b, err := os.ReadFile(resolve(f, dir, hostRoot))
			if err != nil {
				return nil, kubeconfigError(path, fmt.Sprintf("%s: %s %s cannot be read: %v", what, fileKey, f, err), "run doctor as root on the node, or fix "+fileKey)
			}
			return b, nil
		}
		return nil, nil
	}

	server := strings.TrimRight(str(cluster["server"]), "/")
	if u, err := url.Parse(server); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, kubeconfigError(path, fmt.Sprintf("cluster server %q is not an https:// URL", server), "fix the cluster's server")
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: str(cluster["tls-server-name"])}
	if str(cluster["insecure-skip-tls-verify"]) == "true" || cluster["insecure-skip-tls-verify"] == true {
		tlsConf.InsecureSkipVerify = true
	}
	ca, err := read("cluster "+str(context["cluster"]), cluster, "certificate-authority-data", "certificate-authority")
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
	for _, k := range []string{"exec", "auth-provider"} {
		if user[k] != nil {
			return nil, kubeconfigError(path, fmt.Sprintf("user %q authenticates with %s, which doctor does not run (it links no client-go)", str(context["user"]), k),
				"use a kubeconfig with a client certificate or a token, e.g. the kubelet's (/etc/kubernetes/kubelet.conf)")
		}
	}
	cert, err := read("user "+str(context["user"]), user, "client-certificate-data", "client-certificate")
	if err != nil {
		return nil, err
	}
	key, err := read("user "+str(context["user"]), user, "client-key-data", "client-key")
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
	c := &apiClient{server: server, tls: tlsConf, timeout: timeout, token: str(user["token"]), user: str(user["username"]), pass: str(user["password"])}
	if f := str(user["tokenFile"]); c.token == "" && f != "" {
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

// named finds {name: name, <field>: {...}} in a kubeconfig list and returns
// the field's map.
func named(list any, name, field string) map[string]any {
	items, _ := list.([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		if str(m["name"]) == name {
			v, _ := m[field].(map[string]any)
			if v == nil {
				v = map[string]any{}
			}
			return v
		}
	}
	return nil
}

func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return fmt.Sprint(v)
	}
	return ""
}
