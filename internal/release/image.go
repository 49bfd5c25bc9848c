package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
)

// OCI media types and annotation keys (OCI image spec v1.1).
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationRefName names an image in an OCI layout's index.json: the
	// tag of `oci-archive:file:tag` (skopeo) and of containerd's import.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Image is the csi-registrar image for one platform: the root holds the
// binary as /csi-registrar and, as a symlink to it, /csi-node-driver-registrar
// (the name upstream's exec probes call; the binary picks the register role
// from it), as `make image` builds it from the Dockerfile.
type Image struct {
	// Arch is the GOARCH and OCI architecture: amd64 or arm64.
	Arch string
	// Binary is the static linux/Arch csi-registrar.
	Binary []byte
}

// ImageOptions are what every platform's image shares.
type ImageOptions struct {
	// Version is the release version: the label org.opencontainers.image.version
	// and the tag (AnnotationRefName) of the index in the archive.
	Version string
	// Created is the image's creation time, also the files' modification
	// time: the same input gives the same bytes (e.g. the commit's time).
	Created time.Time
	// Revision is the source revision (a commit hash); empty: no label.
	Revision string
}

// Labels are the image's labels: those of the Dockerfile, plus the source
// and revision.
func (o ImageOptions) Labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "csi-registrar",
		"org.opencontainers.image.description": "Kubelet plugin registrar for CSI drivers (drop-in for node-driver-registrar) and a reference CSI node driver",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.source":      "https://github.com/csi-registrar/csi-registrar",
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Platform is an OCI platform.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

// platformOf is the OCI platform of a GOARCH: arm64 images carry variant v8,
// as the registries' official images do.
func platformOf(arch string) (Platform, error) {
	switch arch {
	case "amd64":
		return Platform{Architecture: arch, OS: "linux"}, nil
	case "arm64":
		return Platform{Architecture: arch, OS: "linux", Variant: "v8"}, nil
	}
	return Platform{}, fmt.Errorf("architecture %q: the release has linux/amd64 and linux/arm64 only", arch)
}

type imageConfig struct {
	Created      string         `json:"created"`
	Architecture string         `json:"architecture"`
	OS           string         `json:"os"`
	Variant      string         `json:"variant,omitempty"`
	Config       runtimeConfig  `json:"config"`
	RootFS       rootFS         `json:"rootfs"`
	History      []historyEntry `json:"history"`
}

type runtimeConfig struct {
	User       string            `json:"User"`
	Entrypoint []string          `json:"Entrypoint"`
	Labels     map[string]string `json:"Labels"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type historyEntry struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
	Comment   string `json:"comment,omitempty"`
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []Descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// blobs is the content of an OCI layout's blobs/sha256/, by digest.
type blobs map[string][]byte

func (b blobs) add(mediaType string, content []byte) Descriptor {
	sum := sha256.Sum256(content)
	d := "sha256:" + hex.EncodeToString(sum[:])
	b[d] = content
	return Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(content))}
}

func (b blobs) addJSON(mediaType string, v any) (Descriptor, error) {
	content, err := json.Marshal(v)
	if err != nil {
		return Descriptor{}, err
	}
	return b.add(mediaType, content), nil
}

// WriteOCIArchive writes one multi-platform image, an image index holding
// one image per element of images, as an OCI archive: a tar of an OCI image
// layout (oci-layout, index.json, blobs/sha256/) whose index.json lists the
// image index, tagged opts.Version. The same input gives the same bytes. It
// returns the image index's descriptor: its digest is the image's digest in
// a registry after a push that keeps digests (skopeo copy --all, crane push).
func WriteOCIArchive(w io.Writer, opts ImageOptions, images []Image) (Descriptor, error) {
	if opts.Version == "" || opts.Created.IsZero() {
		return Descriptor{}, fmt.Errorf("image options %+v: Version and Created are required", opts)
	}
	if len(images) == 0 {
		return Descriptor{}, fmt.Errorf("no image to write")
	}
	created := opts.Created.UTC().Truncate(time.Second)
	b := blobs{}
	var manifests []Descriptor
	seen := map[string]bool{}
	for _, img := range images {
		p, err := platformOf(img.Arch)
		if err != nil {
			return Descriptor{}, err
		}
		if seen[img.Arch] {
			return Descriptor{}, fmt.Errorf("architecture %s given twice", img.Arch)
		}
		seen[img.Arch] = true
		layer, diffID, err := rootLayer(img.Binary, created)
		if err != nil {
			return Descriptor{}, err
		}
		layerDesc := b.add(MediaTypeLayer, layer)
		cfg := imageConfig{
			Created:      created.Format(time.RFC3339),
			Architecture: p.Architecture,
			OS:           p.OS,
			Variant:      p.Variant,
			Config: runtimeConfig{
				// uid 0: the kubelet's plugins_registry is root-owned 0750;
				// the manifests drop every capability.
				User:       "0:0",
				Entrypoint: []string{"/csi-registrar", "register"},
				Labels:     opts.Labels(),
			},
			RootFS: rootFS{Type: "layers", DiffIDs: []string{diffID}},
			History: []historyEntry{{
				Created:   created.Format(time.RFC3339),
				CreatedBy: "make release",
				Comment:   "/csi-registrar and the symlink /csi-node-driver-registrar",
			}},
		}
		cfgDesc, err := b.addJSON(MediaTypeConfig, cfg)
		if err != nil {
			return Descriptor{}, err
		}
		m, err := b.addJSON(MediaTypeManifest, manifest{
			SchemaVersion: 2,
			MediaType:     MediaTypeManifest,
			Config:        cfgDesc,
			Layers:        []Descriptor{layerDesc},
		})
		if err != nil {
			return Descriptor{}, err
		}
		m.Platform = &p
		manifests = append(manifests, m)
	}
	idx, err := b.addJSON(MediaTypeIndex, index{
		SchemaVersion: 2,
		MediaType:     MediaTypeIndex,
		Manifests:     manifests,
		Annotations: map[string]string{
			"org.opencontainers.image.version": opts.Version,
			"org.opencontainers.image.created": created.Format(time.RFC3339),
		},
	})
	if err != nil {
		return Descriptor{}, err
	}
	tagged := idx
	tagged.Annotations = map[string]string{AnnotationRefName: opts.Version}
	top, err := json.Marshal(index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{tagged}})
	if err != nil {
		return Descriptor{}, err
	}
	if err := writeLayout(w, created, top, b); err != nil {
		return Descriptor{}, err
	}
	return idx, nil
}

// rootLayer is the gzipped tar of the image's root and the digest of the
// uncompressed tar (the config's diff_id).
func rootLayer(binary []byte, mtime time.Time) (layer []byte, diffID string, err error) {
	if len(binary) == 0 {
		return nil, "", fmt.Errorf("empty binary")
	}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: "csi-registrar", Mode: 0o755, Size: int64(len(binary)),
		ModTime: mtime, Format: tar.FormatPAX,
	}); err != nil {
		return nil, "", err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, "", err
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeSymlink, Name: "csi-node-driver-registrar", Linkname: "csi-registrar", Mode: 0o777,
		ModTime: mtime, Format: tar.FormatPAX,
	}); err != nil {
		return nil, "", err
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw.Bytes())
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, "", err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), "sha256:" + hex.EncodeToString(sum[:]), nil
}

// writeLayout writes the OCI image layout as a tar: oci-layout, index.json,
// then the blobs in digest order.
func writeLayout(w io.Writer, mtime time.Time, indexJSON []byte, b blobs) error {
	tw := tar.NewWriter(w)
	file := func(name string, content []byte) error {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: mtime, Format: tar.FormatPAX,
		}); err != nil {
			return err
		}
		_, err := tw.Write(content)
		return err
	}
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX})
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := file("index.json", indexJSON); err != nil {
		return err
	}
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	digests := make([]string, 0, len(b))
	for d := range b {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	for _, d := range digests {
		if err := file("blobs/sha256/"+d[len("sha256:"):], b[d]); err != nil {
			return err
		}
	}
	return tw.Close()
}
