package stubdriver

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultKubeletPodsDir is Options.KubeletPodsDir's default: where the
// kubelet puts the target paths of the pods' volumes.
const DefaultKubeletPodsDir = "/var/lib/kubelet/pods"

// publishTarget checks a NodePublishVolume target_path and returns the path
// to mount at: target with every symbolic link resolved. It refuses a path
// with a ".." element, one that resolves outside the kubelet's pods
// directory, and one inside the state directory (or holding it): the kubelet
// never asks for those, and the driver, which runs as root, must not mount
// (and later unmount and remove) anywhere else.
//
// A symbolic link swapped in after this check is not caught (mount(2)
// follows it); only root can write in the kubelet's pods directory.
func (v *volumes) publishTarget(target string) (string, error) {
	if slices.Contains(strings.Split(target, "/"), "..") {
		return "", status.Errorf(codes.InvalidArgument, "target_path %q has a '..' element: give the path itself", target)
	}
	resolved, err := resolve(target)
	if err != nil {
		return "", err
	}
	if err := v.inPodsDir(target, resolved); err != nil {
		return "", err
	}
	state, err := filepath.EvalSymlinks(v.dir)
	if err != nil {
		return "", status.Errorf(codes.Internal, "resolve the state directory %s: %v", v.dir, err)
	}
	if within(resolved, state) || within(state, resolved) {
		return "", status.Errorf(codes.InvalidArgument, "target_path %q is (or holds) the driver's state directory %s: "+
			"the volumes' data is there; publish at a path under the kubelet's pods directory", target, v.dir)
	}
	return resolved, nil
}

// unpublishTarget returns the path to unpublish at (the parent resolved, the
// last element not followed), or "" when target cannot be anything this
// driver published: outside the kubelet's pods directory or inside the state
// directory.
func (v *volumes) unpublishTarget(target string) (string, error) {
	if slices.Contains(strings.Split(target, "/"), "..") {
		return "", nil // publish refuses these: never ours
	}
	parent, err := resolve(filepath.Dir(filepath.Clean(target)))
	if err != nil {
		return "", err
	}
	p := filepath.Join(parent, filepath.Base(target))
	if v.inPodsDir(target, p) != nil {
		return "", nil
	}
	if state, err := filepath.EvalSymlinks(v.dir); err == nil && (within(p, state) || within(state, p)) {
		return "", nil
	}
	return p, nil
}

// inPodsDir checks that resolved, the resolved target, is below the
// kubelet's pods directory.
func (v *volumes) inPodsDir(target, resolved string) error {
	pods, err := filepath.EvalSymlinks(v.podsDir)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "the kubelet's pods directory %s (--kubelet-pods-dir): %v; "+
			"mount it into the driver's container at the same path", v.podsDir, err)
	}
	if resolved == pods || !within(resolved, pods) {
		return status.Errorf(codes.InvalidArgument, "target_path %q resolves to %s, which is not under the kubelet's pods directory %s "+
			"(--kubelet-pods-dir): the driver publishes only there", target, resolved, v.podsDir)
	}
	return nil
}

// resolve returns p (absolute, clean) with the symbolic links of its
// existing part resolved and the rest appended. A dangling symbolic link is
// refused: mkdir and mount would follow it somewhere unchecked.
func resolve(p string) (string, error) {
	p = filepath.Clean(p)
	rest := ""
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", status.Errorf(codes.Internal, "resolve target_path %s: %v", p, err)
		}
		if st, lerr := os.Lstat(p); lerr == nil && st.Mode().Type() == fs.ModeSymlink {
			return "", status.Errorf(codes.InvalidArgument, "target_path has a symbolic link %s to a missing file: refused", p)
		}
		if p == "/" {
			return filepath.Join("/", rest), nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = filepath.Dir(p)
	}
}

// within reports whether p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
