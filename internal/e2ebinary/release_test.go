package e2ebinary

import (
	"errors"
	"testing"
)

func TestParseRelease(t *testing.T) {
	for in, want := range map[string]string{
		"v1.37.2":         "v1.37.2",
		"v1.38.0-alpha.1": "v1.38.0-alpha.1",
		"v1.36.0-rc.0":    "v1.36.0-rc.0",
	} {
		r, err := ParseRelease(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRelease(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, in := range []string{"", "1.37.2", "v1.37", "v2.0.0", "v1.37.02", "v1.30.4-eks-a737599", "v1.30.2+k3s1", "v1.37.2 ", "latest"} {
		var re *ReleaseError
		if r, err := ParseRelease(in); !errors.As(err, &re) || re.Value != in {
			t.Errorf("ParseRelease(%q) = %v, %v; want a *ReleaseError naming it", in, r, err)
		}
	}
	r, _ := ParseRelease("v1.38.0-beta.2")
	if got := r.StagingVersion(); got != "v0.38.0-beta.2" {
		t.Errorf("StagingVersion %s, want v0.38.0-beta.2", got)
	}
	if got := r.MinorString(); got != "1.38" {
		t.Errorf("MinorString %s, want 1.38", got)
	}
}

// TestServerRelease: the versions API servers report, from upstream and
// from distributions, map to the upstream release whose suite fits them.
func TestServerRelease(t *testing.T) {
	for _, tc := range []struct{ in, want, dropped string }{
		{"v1.37.2", "v1.37.2", ""},
		{"v1.38.0-alpha.1", "v1.38.0-alpha.1", ""},
		{"v1.38.0-alpha.1.24+8cbd3c4a2e1f0a", "v1.38.0-alpha.1", ".24+8cbd3c4a2e1f0a"}, // a build between tags
		{"v1.30.4-eks-a737599", "v1.30.4", "-eks-a737599"},
		{"v1.30.5-gke.1014001", "v1.30.5", "-gke.1014001"},
		{"v1.30.2+k3s1", "v1.30.2", "+k3s1"},
	} {
		r, dropped, err := ServerRelease(tc.in)
		if err != nil || r.String() != tc.want || dropped != tc.dropped {
			t.Errorf("ServerRelease(%q) = %v, %q, %v; want %s, %q", tc.in, r, dropped, err, tc.want, tc.dropped)
		}
	}
	for _, in := range []string{"", "v0.0.0-master+$Format:%H$", "v2.1.0", "garbage"} {
		var re *ReleaseError
		if _, _, err := ServerRelease(in); !errors.As(err, &re) {
			t.Errorf("ServerRelease(%q): %v, want a *ReleaseError", in, err)
		}
	}
}
