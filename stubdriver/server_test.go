package stubdriver_test

import (
	"context"
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// bg is the context of the test calls: they are answered at once, or the
// test binary's own timeout reports a hang.
var bg = context.Background()

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: code %s (%v), want %s", what, got, err, want)
	}
}

func TestIdentity(t *testing.T) {
	for _, tc := range []struct {
		name              string
		opts              stubdriver.Options
		wantName, version string
	}{
		{"GetPluginInfo default name", stubdriver.Options{VendorVersion: "v1.2.3"}, stubdriver.DefaultName, "v1.2.3"},
		{"GetPluginInfo given name", stubdriver.Options{Name: "other.csi.example.com"}, "other.csi.example.com", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDriver(t, tc.opts)
			rsp, err := d.identity().GetPluginInfo(bg, &csi.GetPluginInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if rsp.GetName() != tc.wantName || rsp.GetVendorVersion() != tc.version || len(rsp.GetManifest()) != 0 {
				t.Errorf("GetPluginInfo = %q %q %v, want %q %q and no manifest", rsp.GetName(), rsp.GetVendorVersion(),
					rsp.GetManifest(), tc.wantName, tc.version)
			}
		})
	}
	t.Run("Probe", func(t *testing.T) {
		d := startDriver(t, stubdriver.Options{})
		rsp, err := d.identity().Probe(bg, &csi.ProbeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rsp.GetReady() == nil || !rsp.GetReady().GetValue() {
			t.Errorf("Probe ready = %v, want true", rsp.GetReady())
		}
	})
	for _, tc := range []struct {
		name     string
		topology map[string]string
		want     []csi.PluginCapability_Service_Type
	}{
		{"GetPluginCapabilities without topology", nil, nil},
		{"GetPluginCapabilities with empty topology", map[string]string{}, nil},
		{"GetPluginCapabilities with topology", map[string]string{"example.com/zone": "a"},
			[]csi.PluginCapability_Service_Type{csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDriver(t, stubdriver.Options{Topology: tc.topology})
			rsp, err := d.identity().GetPluginCapabilities(bg, &csi.GetPluginCapabilitiesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var got []csi.PluginCapability_Service_Type
			for _, c := range rsp.GetCapabilities() {
				if c.GetService() == nil {
					t.Errorf("unexpected capability %v", c)
					continue
				}
				got = append(got, c.GetService().GetType())
			}
			if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
				t.Errorf("capabilities = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeGetInfo(t *testing.T) {
	t.Run("without topology", func(t *testing.T) {
		d := startDriver(t, stubdriver.Options{NodeID: "worker-7"})
		rsp, err := d.node().NodeGetInfo(bg, &csi.NodeGetInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rsp.GetNodeId() != "worker-7" || rsp.GetMaxVolumesPerNode() != 0 || rsp.GetAccessibleTopology() != nil {
			t.Errorf("NodeGetInfo = %v, want node worker-7, no limit, no topology", rsp)
		}
	})
	t.Run("with limit and topology", func(t *testing.T) {
		topo := map[string]string{
			"topology.stub.csi.example.com/zone": "zone-a",
			"topology.stub.csi.example.com/rack": "",
			"topology.kubernetes.io/region":      "eu-1",
		}
		want := maps.Clone(topo)
		d := startDriver(t, stubdriver.Options{NodeID: "worker-8", MaxVolumesPerNode: 31, Topology: topo})
		// The driver must keep serving what New validated, whatever the
		// caller does with its map afterwards.
		topo["topology.stub.csi.example.com/zone"] = "changed"
		topo["Invalid Key"] = "x"
		rsp, err := d.node().NodeGetInfo(bg, &csi.NodeGetInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rsp.GetNodeId() != "worker-8" || rsp.GetMaxVolumesPerNode() != 31 {
			t.Errorf("NodeGetInfo = %v, want node worker-8 and limit 31", rsp)
		}
		if got := rsp.GetAccessibleTopology().GetSegments(); !maps.Equal(got, want) {
			t.Errorf("topology segments = %v, want %v", got, want)
		}
	})
}

func TestNodeService(t *testing.T) {
	d := startDriver(t, stubdriver.Options{})
	node := d.node()

	t.Run("NodeGetCapabilities", func(t *testing.T) {
		rsp, err := node.NodeGetCapabilities(bg, &csi.NodeGetCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		caps := rsp.GetCapabilities()
		if len(caps) != 1 || caps[0].GetRpc().GetType() != csi.NodeServiceCapability_RPC_GET_VOLUME_STATS {
			t.Errorf("capabilities = %v, want GET_VOLUME_STATS only (no staging or expansion)", caps)
		}
	})

	mount := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	for _, tc := range []struct {
		name string
		req  *csi.NodePublishVolumeRequest
		want codes.Code
	}{
		{"publish without arguments", &csi.NodePublishVolumeRequest{}, codes.InvalidArgument},
		{"publish without volume_id", &csi.NodePublishVolumeRequest{TargetPath: "/mnt/t", VolumeCapability: mount}, codes.InvalidArgument},
		{"publish without target_path", &csi.NodePublishVolumeRequest{VolumeId: "v1", VolumeCapability: mount}, codes.InvalidArgument},
		{"publish without volume_capability", &csi.NodePublishVolumeRequest{VolumeId: "v1", TargetPath: "/mnt/t"}, codes.InvalidArgument},
		// Without Options.StateDir the driver has no volumes: a complete
		// request is answered, not served (publish_test.go covers publishing).
		{"publish valid request", &csi.NodePublishVolumeRequest{VolumeId: "v1", TargetPath: "/mnt/t", VolumeCapability: mount,
			VolumeContext: map[string]string{stubdriver.EphemeralContextKey: "true"}}, codes.FailedPrecondition},
		{"publish valid read-only request", &csi.NodePublishVolumeRequest{VolumeId: "v1", TargetPath: "/mnt/t", VolumeCapability: mount,
			VolumeContext: map[string]string{stubdriver.EphemeralContextKey: "true"}, Readonly: true}, codes.FailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rsp, err := node.NodePublishVolume(bg, tc.req)
			wantCode(t, "NodePublishVolume", err, tc.want)
			if rsp != nil {
				t.Errorf("response %v with an error", rsp)
			}
		})
	}
	for _, tc := range []struct {
		name string
		req  *csi.NodeUnpublishVolumeRequest
		want codes.Code
	}{
		{"unpublish without arguments", &csi.NodeUnpublishVolumeRequest{}, codes.InvalidArgument},
		{"unpublish without volume_id", &csi.NodeUnpublishVolumeRequest{TargetPath: "/mnt/t"}, codes.InvalidArgument},
		{"unpublish without target_path", &csi.NodeUnpublishVolumeRequest{VolumeId: "v1"}, codes.InvalidArgument},
		// Nothing can be published without a state directory, so
		// unpublishing succeeds (it is idempotent).
		{"unpublish valid request", &csi.NodeUnpublishVolumeRequest{VolumeId: "v1", TargetPath: "/mnt/t"}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := node.NodeUnpublishVolume(bg, tc.req)
			wantCode(t, "NodeUnpublishVolume", err, tc.want)
		})
	}

	// Nothing is published without a state directory: no volume to report.
	t.Run("volume stats without a state directory", func(t *testing.T) {
		_, err := node.NodeGetVolumeStats(bg, &csi.NodeGetVolumeStatsRequest{VolumeId: "v1", VolumePath: "/mnt/t"})
		wantCode(t, "NodeGetVolumeStats", err, codes.NotFound)
	})

	t.Run("unimplemented methods", func(t *testing.T) {
		_, err := node.NodeStageVolume(bg, &csi.NodeStageVolumeRequest{VolumeId: "v1", StagingTargetPath: "/s", VolumeCapability: mount})
		wantCode(t, "NodeStageVolume", err, codes.Unimplemented)
		_, err = node.NodeUnstageVolume(bg, &csi.NodeUnstageVolumeRequest{VolumeId: "v1", StagingTargetPath: "/s"})
		wantCode(t, "NodeUnstageVolume", err, codes.Unimplemented)
		_, err = node.NodeExpandVolume(bg, &csi.NodeExpandVolumeRequest{VolumeId: "v1", VolumePath: "/mnt/t"})
		wantCode(t, "NodeExpandVolume", err, codes.Unimplemented)
		// No Controller service is registered at all.
		ctrl := csi.NewControllerClient(d.conn)
		_, err = ctrl.ControllerGetCapabilities(bg, &csi.ControllerGetCapabilitiesRequest{})
		wantCode(t, "ControllerGetCapabilities", err, codes.Unimplemented)
		_, err = ctrl.CreateVolume(bg, &csi.CreateVolumeRequest{Name: "v1"})
		wantCode(t, "CreateVolume", err, codes.Unimplemented)
	})
}
