package drivercases

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ArchiveImage returns the image name an image archive carries: RepoTags
// of a docker-archive (docker save, buildah push docker-archive:), else the
// ref.name annotation of an OCI archive's index.
func ArchiveImage(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var oci string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w (want a docker-archive or OCI tarball)", archive, err)
		}
		switch h.Name {
		case "manifest.json", "./manifest.json":
			var m []struct{ RepoTags []string }
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				return "", fmt.Errorf("%s: manifest.json: %w", archive, err)
			}
			for _, e := range m {
				if len(e.RepoTags) > 0 {
					return e.RepoTags[0], nil
				}
			}
		case "index.json", "./index.json":
			var idx struct {
				Manifests []struct {
					Annotations map[string]string
				}
			}
			if err := json.NewDecoder(tr).Decode(&idx); err != nil {
				return "", fmt.Errorf("%s: index.json: %w", archive, err)
			}
			for _, m := range idx.Manifests {
				for _, k := range []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"} {
					if v := m.Annotations[k]; v != "" && oci == "" {
						oci = v
					}
				}
			}
		}
	}
	if oci != "" {
		return oci, nil
	}
	return "", fmt.Errorf("%s names no image (no RepoTags in manifest.json, no ref.name in index.json): save it with a tag, e.g. buildah push IMAGE docker-archive:%s:IMAGE", archive, archive)
}
