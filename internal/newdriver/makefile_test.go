package newdriver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTool is a stand-in for docker, podman or buildah: it appends its
// arguments to $TOOL_LOG, answers `docker info` with $DOCKER_INFO_RC, and
// writes the archive `save -o FILE` or `push IMAGE docker-archive:FILE:NAME`
// names.
const fakeTool = `#!/bin/sh
echo "$(basename "$0") $*" >>"$TOOL_LOG"
[ "$1" = info ] && exit "${DOCKER_INFO_RC:-0}"
prev=
for a in "$@"; do
  case "$a" in docker-archive:*) f=${a#docker-archive:}; : >"${f%%:*}" ;; esac
  [ "$prev" = -o ] && : >"$a"
  prev=$a
done
exit 0
`

// TestMakefileImage runs the generated Makefile's image target with fake
// container tools: docker when an engine answers, buildah (chroot isolation,
// vfs storage under the user's cache) when none does, CONTAINER_TOOL when set.
// Each writes $(IMAGE_TAR).
func TestMakefileImage(t *testing.T) {
	makefile := renderedMakefile(t)
	for _, tc := range []struct {
		name, dockerInfoRC, containerTool string
		want                              []string // in the tools' log, in order
	}{
		{"docker engine answers", "0", "", []string{"docker info", "docker build --build-arg VERSION=dev -t fast-csi:dev .", "docker save -o bin/image.tar fast-csi:dev"}},
		{"no docker engine", "1", "", []string{"docker info",
			"buildah --root CACHE/fast-csi/buildah/root --runroot CACHE/fast-csi/buildah/runroot --storage-driver vfs build --quiet --isolation chroot --build-arg VERSION=dev -t fast-csi:dev .",
			"buildah --root CACHE/fast-csi/buildah/root --runroot CACHE/fast-csi/buildah/runroot --storage-driver vfs push --quiet fast-csi:dev docker-archive:bin/image.tar:fast-csi:dev"}},
		{"CONTAINER_TOOL=podman", "0", "podman", []string{"podman build --build-arg VERSION=dev -t fast-csi:dev .", "podman save -o bin/image.tar fast-csi:dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, fake, cache := t.TempDir(), t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "Makefile"), makefile, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, "bin", "rootfs"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, tool := range []string{"docker", "podman", "buildah"} {
				if err := os.WriteFile(filepath.Join(fake, tool), []byte(fakeTool), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			log := filepath.Join(fake, "log")
			// -o bin/rootfs: the root is there; nothing is built.
			args := []string{"--no-print-directory", "-o", "bin/rootfs", "image", "VERSION=dev"}
			if tc.containerTool != "" {
				args = append(args, "CONTAINER_TOOL="+tc.containerTool)
			}
			cmd := exec.Command("make", args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"),
				"TOOL_LOG="+log, "DOCKER_INFO_RC="+tc.dockerInfoRC, "XDG_CACHE_HOME="+cache, "MAKEFLAGS=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make image: %v\n%s", err, out)
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(data), cache, "CACHE")), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("the tools ran:\n%s\nwant:\n%s\nmake said:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), out)
			}
			if _, err := os.Stat(filepath.Join(dir, "bin", "image.tar")); err != nil {
				t.Errorf("no archive: %v\n%s", err, out)
			}
		})
	}
}

// renderedMakefile returns the Makefile a generated project gets (testModule,
// testDriver), skipping the test where no make runs it.
func renderedMakefile(t *testing.T) []byte {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	o := Options{Module: testModule, Driver: testDriver, Source: checkout(t)}
	files, err := o.render()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.path == "Makefile" {
			return f.data
		}
	}
	t.Fatal("no Makefile rendered")
	return nil
}
