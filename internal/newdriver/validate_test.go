package newdriver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// checkout is this repository, the source every test generates from.
func checkout(t *testing.T) Source {
	t.Helper()
	s, err := CheckoutSource(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBadInput: each bad input is refused before anything is written, with
// an error naming the value, the rule and the fix.
func TestBadInput(t *testing.T) {
	src := checkout(t)
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	longKubelet := "/var/snap/microk8s/common/var/lib/kubelet" // microk8s' kubelet root
	longName := strings.Repeat("a", 50) + ".example.com"       // 62 characters: a valid name
	for _, tc := range []struct {
		name   string
		modify func(*Options)
		want   []string // in the error: the value, the rule, the fix
	}{
		{"invalid driver name", func(o *Options) { o.Driver = "my_driver" },
			[]string{`"my_driver"`, `contains '_'`, "e.g. my.csi.example.com"}},
		{"empty driver name", func(o *Options) { o.Driver = "" }, []string{`driver name`, "must not be empty"}},
		{"driver name ending in a dot", func(o *Options) { o.Driver = "my.csi." }, []string{`"my.csi."`, "every dot-separated part"}},
		{"invalid module path", func(o *Options) { o.Module = "example.com/My Driver" },
			[]string{`"example.com/My Driver"`, "invalid char", "e.g. github.com/you/mydriver"}},
		{"module path without a dot", func(o *Options) { o.Module = "mydriver" }, []string{`"mydriver"`, "missing dot in first path element"}},
		{"non-empty directory", func(o *Options) { o.Dir = full },
			[]string{full, "must be empty or not exist", "notes.txt", "nothing is overwritten"}},
		{"no directory", func(o *Options) { o.Dir = "" }, []string{"directory", "must not be empty"}},
		{"CSI socket per pod too long", func(o *Options) { o.Driver, o.KubeletDir = longName, longKubelet },
			[]string{longName, longKubelet + "/plugins/" + longName + "/" + podUIDPlaceholder + ".sock", "is 154 bytes long, a unix socket path holds at most 107",
				"at most 15 bytes (this one is 62)", "33 bytes longer than csi.sock"}},
		{"CSI socket per pod too long at the default kubelet directory", func(o *Options) { o.Driver = strings.Repeat("a", 29) + ".example.com" },
			[]string{"/var/lib/kubelet/plugins/" + strings.Repeat("a", 29) + ".example.com/" + podUIDPlaceholder + ".sock", "is 108 bytes long",
				"at most 40 bytes (this one is 41)"}},
		{"package name of an import", func(o *Options) { o.Package = "registrar" },
			[]string{`"registrar"`, "already a name in the driver's", "-package"}},
		{"package name that is a keyword", func(o *Options) { o.Package = "func" }, []string{`"func"`, "keyword"}},
		{"derived package name of an identifier", func(o *Options) { o.Module = "example.com/status" },
			[]string{`"status"`, "already a name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "new")
			o := Options{Module: "example.com/mydriver", Driver: "my.csi.example.com", Dir: dir, Source: src}
			tc.modify(&o)
			before := listDir(t, o.Dir)
			_, err := Generate(context.Background(), o, false)
			if !csiplugin.IsValidationError(err) {
				t.Fatalf("Generate = %v, want a *csiplugin.ValidationError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if after := listDir(t, o.Dir); after != before {
				t.Errorf("%s changed: %q before, %q after", o.Dir, before, after)
			}
		})
	}
}

// listDir names dir's entries, or says it does not exist.
func listDir(t *testing.T, dir string) string {
	t.Helper()
	if dir == "" {
		return ""
	}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return "(absent)"
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

// Every socket the manifests name, at its longest, for the longest driver
// name that fits each kubelet directory: 40 bytes under the default one,
// 15 under microk8s' (the CSI socket per pod decides). One byte more fails.
func TestSocketPathsLongestDriverName(t *testing.T) {
	for _, tc := range []struct {
		kubeletDir string
		longest    int
	}{
		{"", 40},
		{"/var/lib/k0s/kubelet", 36},
		{"/var/snap/microk8s/common/var/lib/kubelet", 15},
	} {
		name := func(n int) string { return strings.Repeat("a", n-len(".io")) + ".io" }
		o := Options{Module: "example.com/mydriver", Driver: name(tc.longest), KubeletDir: tc.kubeletDir}
		if err := o.validateSockets(); err != nil {
			t.Errorf("a %d-byte name under %q: %v", tc.longest, o.kubeletDir(), err)
		}
		for _, s := range o.hostSockets() {
			if len(s.path) > csiplugin.MaxSocketPathLength {
				t.Errorf("%s %s is %d bytes", s.what, s.path, len(s.path))
			}
		}
		o.Driver = name(tc.longest + 1)
		if err := o.validateSockets(); err == nil || !strings.Contains(err.Error(), "CSI socket per pod") {
			t.Errorf("a %d-byte name under %q: %v, want the CSI socket per pod too long", tc.longest+1, o.kubeletDir(), err)
		}
	}
}

// The announcement sockets carry at most RollingUpdatePrefixMax bytes of the
// name: under the default kubelet directory they fit the longest name.
func TestAnnouncementSocketLongestName(t *testing.T) {
	o := Options{Driver: strings.Repeat("a", 59) + ".com"}
	for _, s := range o.hostSockets() {
		if strings.HasPrefix(s.what, "announcement") && len(s.path) > csiplugin.MaxSocketPathLength {
			t.Errorf("%s %s is %d bytes", s.what, s.path, len(s.path))
		}
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ module, binary, pkg string }{
		{"example.com/mydriver", "mydriver", "mydriver"},
		{"github.com/Acme/Fast_CSI.driver/v2", "fast-csi-driver", "fastcsidriver"},
		{"example.com/x/3par", "3par", "driver3par"},
	} {
		o := Options{Module: tc.module}
		if o.Binary() != tc.binary || o.packageName() != tc.pkg {
			t.Errorf("%s: binary %q package %q, want %q %q", tc.module, o.Binary(), o.packageName(), tc.binary, tc.pkg)
		}
	}
}
