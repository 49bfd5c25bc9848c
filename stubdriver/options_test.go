package stubdriver_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// TestNewValidation checks every rule New applies to Options. A refused value
// must come back as a *csiplugin.ValidationError whose message quotes the
// value and states the rule.
func TestNewValidation(t *testing.T) {
	valid := func() stubdriver.Options {
		return stubdriver.Options{Endpoint: "unix:///tmp/sd/csi.sock", NodeID: "node-1", Logger: quietLogger()}
	}
	cases := []struct {
		name   string
		modify func(*stubdriver.Options)
		value  string // the value the error must quote; "" means New must succeed
		rule   string // a part of the rule the error must state
	}{
		{name: "defaults", modify: func(*stubdriver.Options) {}},

		// Node ID: required, at most 192 bytes (CSINode validation).
		{name: "empty node ID", modify: func(o *stubdriver.Options) { o.NodeID = "" },
			value: "", rule: "must not be empty"},
		{name: "whitespace node ID", modify: func(o *stubdriver.Options) { o.NodeID = " \t\n" },
			value: " \t\n", rule: "must not be empty"},
		{name: "192-byte node ID", modify: func(o *stubdriver.Options) { o.NodeID = strings.Repeat("n", 192) }},
		{name: "193-byte node ID", modify: func(o *stubdriver.Options) { o.NodeID = strings.Repeat("n", 193) },
			value: strings.Repeat("n", 193), rule: "is 193 bytes long, the limit is 192"},
		// The limit is in bytes, not characters: 96 × "é" is 192 bytes.
		{name: "192-byte multibyte node ID", modify: func(o *stubdriver.Options) { o.NodeID = strings.Repeat("é", 96) }},
		{name: "194-byte multibyte node ID", modify: func(o *stubdriver.Options) { o.NodeID = strings.Repeat("é", 97) },
			value: strings.Repeat("é", 97), rule: "is 194 bytes long, the limit is 192"},

		// Max volumes: 0 means no limit; negative is refused.
		{name: "zero max volumes", modify: func(o *stubdriver.Options) { o.MaxVolumesPerNode = 0 }},
		{name: "positive max volumes", modify: func(o *stubdriver.Options) { o.MaxVolumesPerNode = 128 }},
		{name: "negative max volumes", modify: func(o *stubdriver.Options) { o.MaxVolumesPerNode = -1 },
			value: "-1", rule: "must not be negative"},

		// Driver name: CSI spec and CSINode rules. Empty means DefaultName.
		{name: "empty name means default", modify: func(o *stubdriver.Options) { o.Name = "" }},
		{name: "name stub.csi.example.com", modify: func(o *stubdriver.Options) { o.Name = "stub.csi.example.com" }},
		{name: "name A1", modify: func(o *stubdriver.Options) { o.Name = "A1" }},
		{name: "63-char name", modify: func(o *stubdriver.Options) { o.Name = strings.Repeat("a", 63) }},
		{name: "64-char name", modify: func(o *stubdriver.Options) { o.Name = strings.Repeat("a", 64) },
			value: strings.Repeat("a", 64), rule: "is 64 characters long, the limit is 63"},
		{name: "path traversal name", modify: func(o *stubdriver.Options) { o.Name = "../../evil" },
			value: "../../evil", rule: `'/'`},
		{name: "underscore in name", modify: func(o *stubdriver.Options) { o.Name = "a_b" },
			value: "a_b", rule: `'_' at position 1`},
		{name: "leading dash", modify: func(o *stubdriver.Options) { o.Name = "-a" },
			value: "-a", rule: "must start and end with a letter or digit"},
		{name: "trailing dash", modify: func(o *stubdriver.Options) { o.Name = "a-" },
			value: "a-", rule: "must start and end with a letter or digit"},
		{name: "empty label", modify: func(o *stubdriver.Options) { o.Name = "a..b" },
			value: "a..b", rule: "every dot-separated part"},
		{name: "newline in name", modify: func(o *stubdriver.Options) { o.Name = "a\nb" },
			value: "a\nb", rule: `'\n' at position 1`},

		// Endpoint: a unix socket given as a URL or an absolute path.
		{name: "unix:/// endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "unix:///x" }},
		{name: "unix:/ endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "unix:/x" }},
		{name: "path endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "/x" }},
		{name: "tcp endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "tcp://x" },
			value: "tcp://x", rule: "only unix sockets are supported"},
		{name: "relative path endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "x/csi.sock" },
			value: "x/csi.sock", rule: "must name an absolute socket path"},
		{name: "relative unix:// endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "unix://x" },
			value: "unix://x", rule: "must name an absolute socket path"},
		{name: "empty endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "" },
			value: "", rule: "must name an absolute socket path"},
		{name: "107-byte endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "/" + strings.Repeat("s", 106) }},
		{name: "108-byte endpoint", modify: func(o *stubdriver.Options) { o.Endpoint = "/" + strings.Repeat("s", 107) },
			value: "/" + strings.Repeat("s", 107), rule: "is 108 bytes long, a unix socket path holds at most 107"},

		// State directory: optional, absolute.
		{name: "absolute state dir", modify: func(o *stubdriver.Options) { o.StateDir = "/var/lib/csi-registrar/stub" }},
		{name: "relative state dir", modify: func(o *stubdriver.Options) { o.StateDir = "state" },
			value: "state", rule: "must be an absolute path"},

		// Topology given directly in Options is checked like --topology.
		{name: "valid topology", modify: func(o *stubdriver.Options) {
			o.Topology = map[string]string{"topology.stub.csi.example.com/zone": "zone-a"}
		}},
		{name: "invalid topology value", modify: func(o *stubdriver.Options) {
			o.Topology = map[string]string{"topology.stub.csi.example.com/zone": "zone a"}
		}, value: "topology.stub.csi.example.com/zone=zone a", rule: "the value must be"},
		{name: "reserved topology key", modify: func(o *stubdriver.Options) {
			o.Topology = map[string]string{"kubernetes.io/zone": "a"}
		}, value: "kubernetes.io/zone=a", rule: "keys under kubernetes.io/ cannot be set by the kubelet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := valid()
			tc.modify(&opts)
			d, err := stubdriver.New(opts)
			if tc.rule == "" {
				if err != nil || d == nil {
					t.Fatalf("New: %v, want a driver", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New succeeded, want a validation error")
			}
			if d != nil {
				t.Error("New returned a driver with its error")
			}
			ve := asValidationError(t, err)
			if ve.Value != tc.value {
				t.Errorf("ValidationError.Value = %q, want %q", ve.Value, tc.value)
			}
			if !strings.Contains(ve.Rule, tc.rule) {
				t.Errorf("ValidationError.Rule = %q, want it to contain %q", ve.Rule, tc.rule)
			}
			msg := err.Error()
			if !strings.Contains(msg, strconv.Quote(tc.value)) || !strings.Contains(msg, ve.Rule) {
				t.Errorf("message %q does not quote the value %q and state the rule", msg, tc.value)
			}
			if ve.Fix == "" {
				t.Errorf("message %q says nothing about how to fix it", msg)
			}
		})
	}
}
