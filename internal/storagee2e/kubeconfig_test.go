package storagee2e

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestKubeconfig: the kubeconfig written for the e2e binary reaches the
// cluster as the command's own configuration does, read back by client-go
// as the binary reads it; it is readable by its owner only.
func TestKubeconfig(t *testing.T) {
	proxy, _ := url.Parse("http://proxy.example.com:3128")
	in := &rest.Config{
		Host:            "https://203.0.113.7:6443",
		BearerToken:     "secret-token",
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), ServerName: "api.example.com"},
		Impersonate:     rest.ImpersonationConfig{UserName: "jane", Groups: []string{"dev"}},
		Proxy:           http.ProxyURL(proxy),
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(p, in); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	out, err := clientcmd.BuildConfigFromFlags("", p)
	if err != nil {
		t.Fatal(err)
	}
	if out.Host != in.Host || out.BearerToken != in.BearerToken || string(out.CAData) != "ca" || out.ServerName != in.ServerName ||
		out.Impersonate.UserName != "jane" || !slices.Equal(out.Impersonate.Groups, []string{"dev"}) {
		t.Errorf("read back %+v", out)
	}
	if out.Proxy == nil {
		t.Fatal("no proxy read back")
	}
	u, err := out.Proxy(&http.Request{URL: &url.URL{Scheme: "https", Host: "203.0.113.7:6443"}})
	if err != nil || u == nil || u.String() != proxy.String() {
		t.Errorf("proxy %v, %v; want %s", u, err, proxy)
	}
}
