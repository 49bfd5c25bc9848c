package e2ebinary

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Release is a Kubernetes release as its module k8s.io/kubernetes is tagged:
// v1.37.2, v1.38.0-alpha.1.
type Release struct {
	Major, Minor, Patch int
	// Pre is the pre-release, e.g. "alpha.1", "beta.0", "rc.2"; empty for
	// a release.
	Pre string
}

// releasePattern is a tag of k8s.io/kubernetes: v1.MINOR.PATCH with an
// optional alpha, beta or rc pre-release.
var releasePattern = regexp.MustCompile(`^v(1)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-((?:alpha|beta|rc)\.(?:0|[1-9][0-9]*)))?$`)

// ParseRelease parses a tag of k8s.io/kubernetes, e.g. "v1.37.2". The
// error, a *ReleaseError, says what a tag looks like.
func ParseRelease(s string) (Release, error) {
	m := releasePattern.FindStringSubmatch(s)
	if m == nil {
		return Release{}, &ReleaseError{Value: s, Rule: "is not a Kubernetes release: want v1.MINOR.PATCH, e.g. v1.37.2, or a pre-release such as v1.38.0-alpha.1"}
	}
	return release(m[1], m[2], m[3], m[4]), nil
}

func release(major, minor, patch, pre string) Release {
	a, _ := strconv.Atoi(major)
	b, _ := strconv.Atoi(minor)
	c, _ := strconv.Atoi(patch)
	return Release{Major: a, Minor: b, Patch: c, Pre: pre}
}

// serverPattern is an API server's gitVersion: a release, possibly with a
// distribution's suffix (v1.30.4-eks-a737599, v1.30.5-gke.1014001,
// v1.30.2+k3s1).
var serverPattern = regexp.MustCompile(`^v?(1)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$`)

// prePattern is a pre-release of Kubernetes itself, possibly with the
// number of commits since its tag (a build between tags: alpha.1.24).
var prePattern = regexp.MustCompile(`^((?:alpha|beta|rc)\.(?:0|[1-9][0-9]*))(?:\.[0-9]+)?$`)

// ServerRelease returns the release of k8s.io/kubernetes whose e2e tests
// fit an API server reporting gitVersion (/version). A distribution's
// suffix is dropped: v1.30.4-eks-a737599 is Kubernetes v1.30.4; so is a
// build's position after a pre-release's tag (v1.38.0-alpha.1.24+8cbd3c4a
// is v1.38.0-alpha.1). dropped names what was dropped, for a log line.
func ServerRelease(gitVersion string) (r Release, dropped string, err error) {
	m := serverPattern.FindStringSubmatch(gitVersion)
	if m == nil {
		return Release{}, "", &ReleaseError{Value: gitVersion, Rule: "is not the version of a Kubernetes API server: want v1.MINOR.PATCH, possibly with a distribution's suffix"}
	}
	r = release(m[1], m[2], m[3], "")
	if p := prePattern.FindStringSubmatch(m[4]); p != nil {
		r.Pre = p[1]
	}
	if s := r.String(); s != gitVersion {
		dropped = strings.TrimPrefix(strings.TrimPrefix(gitVersion, "v"), strings.TrimPrefix(s, "v"))
	}
	return r, dropped, nil
}

// String is the tag: v1.37.2.
func (r Release) String() string {
	s := fmt.Sprintf("v%d.%d.%d", r.Major, r.Minor, r.Patch)
	if r.Pre != "" {
		s += "-" + r.Pre
	}
	return s
}

// StagingVersion is the version of the k8s.io staging modules published
// with the release: v0.37.2 for v1.37.2.
func (r Release) StagingVersion() string {
	s := fmt.Sprintf("v0.%d.%d", r.Minor, r.Patch)
	if r.Pre != "" {
		s += "-" + r.Pre
	}
	return s
}

// MinorString is "1.37": the name of kind/localnode/k8sbuild's folders.
func (r Release) MinorString() string { return fmt.Sprintf("%d.%d", r.Major, r.Minor) }

// ReleaseError is a value that is not a Kubernetes release.
type ReleaseError struct {
	Value string // as given
	Rule  string // what it should be
}

func (e *ReleaseError) Error() string { return strconv.Quote(e.Value) + " " + e.Rule }
