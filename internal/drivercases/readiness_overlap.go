package drivercases

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// R2's overlap: the kubelet calls the old instance until the new one is
// confirmed, so volumes published in that window (the new pod's driver
// already running) are the old instance's, and the new instance must know
// them too. A driver that reads the node's state once at start does not.
// To put volumes in that window on purpose, R2 rolls to a template that
// holds the new pod's registrar: the kubelet starts a pod's containers one
// after another and runs each one's postStart hook before it starts the
// next, so with the registrar last and a postStart sleep on the container
// before it, the driver runs while nothing announces it. The template is
// restored (one more rollout) when the case ends.

// overlapHold is how long the new pod's registrar is held back; it bounds
// the time to publish the overlap's volumes.
const overlapHold = 20 * time.Second

// holdRegistrar changes tpl so that the registrar container starts hold
// after the pod's other containers: it moves the registrar last and puts a
// postStart sleep on the container before it (the grace period at least
// the hold, as the API requires). It returns why it cannot ("" when done).
func holdRegistrar(tpl *corev1.PodTemplateSpec, registrar string, hold time.Duration) string {
	cs := tpl.Spec.Containers
	i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == registrar })
	switch {
	case registrar == "":
		return "the driver registers itself (no registrar container): verify cannot start the driver before its registration"
	case i < 0:
		return fmt.Sprintf("no container %s in the pod template", registrar)
	case len(cs) < 2:
		return fmt.Sprintf("the registrar %s is the pod's only container", registrar)
	}
	reg := cs[i]
	cs = append(slices.Delete(cs, i, i+1), reg)
	prev := &cs[len(cs)-2]
	if prev.Lifecycle != nil && prev.Lifecycle.PostStart != nil {
		return fmt.Sprintf("container %s has a postStart hook of its own: verify holds the registrar with one", prev.Name)
	}
	if prev.Lifecycle == nil {
		prev.Lifecycle = &corev1.Lifecycle{}
	}
	secs := int64(hold / time.Second)
	prev.Lifecycle.PostStart = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: secs}}
	if g := tpl.Spec.TerminationGracePeriodSeconds; g == nil || *g < secs {
		tpl.Spec.TerminationGracePeriodSeconds = &secs
	}
	tpl.Spec.Containers = cs
	return ""
}

// setRolloutAnnotation sets RolloutAnnotation on tpl to value.
func setRolloutAnnotation(tpl *corev1.PodTemplateSpec, value string) {
	if tpl.Annotations == nil {
		tpl.Annotations = map[string]string{}
	}
	tpl.Annotations[RolloutAnnotation] = value
}

// editTemplate changes the workload's pod template with edit (retried on a
// conflict) and returns the template as it was.
func (s *suite) editTemplate(ctx context.Context, edit func(*corev1.PodTemplateSpec)) (corev1.PodTemplateSpec, error) {
	w := s.d.spec.Workload
	apps := s.cl.Client.AppsV1()
	var was corev1.PodTemplateSpec
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns := s.cl.Namespace
		switch w.Kind {
		case "DaemonSet":
			return editObjectTemplate(ctx, w.Name, apps.DaemonSets(ns).Get, apps.DaemonSets(ns).Update,
				func(o *appsv1.DaemonSet) *corev1.PodTemplateSpec { return &o.Spec.Template }, &was, edit)
		case "StatefulSet":
			return editObjectTemplate(ctx, w.Name, apps.StatefulSets(ns).Get, apps.StatefulSets(ns).Update,
				func(o *appsv1.StatefulSet) *corev1.PodTemplateSpec { return &o.Spec.Template }, &was, edit)
		case "Deployment":
			return editObjectTemplate(ctx, w.Name, apps.Deployments(ns).Get, apps.Deployments(ns).Update,
				func(o *appsv1.Deployment) *corev1.PodTemplateSpec { return &o.Spec.Template }, &was, edit)
		}
		return fmt.Errorf("%s: cannot roll a %s", w, w.Kind)
	})
	if err != nil {
		return was, fmt.Errorf("roll %s (its pod template changed by verify): %w", w, err)
	}
	return was, nil
}

// editObjectTemplate gets the object name, copies its pod template
// (template) to was, changes it with edit and updates the object: one try
// of editTemplate for one kind of workload.
func editObjectTemplate[T any](ctx context.Context, name string,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
	template func(T) *corev1.PodTemplateSpec, was *corev1.PodTemplateSpec, edit func(*corev1.PodTemplateSpec)) error {
	o, err := get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	tpl := template(o)
	*was = *tpl.DeepCopy()
	edit(tpl)
	_, err = update(ctx, o, metav1.UpdateOptions{})
	return err
}

// rollHeld rolls the workload (value: the rollout annotation) with the new
// pods' registrar held back overlapHold, and restores the template when the
// case ends. When it cannot hold the registrar it rolls plainly and says
// why not.
func (s *suite) rollHeld(t *check, ctx context.Context, value string) (notHeld string) {
	var why string
	orig, err := s.editTemplate(ctx, func(tpl *corev1.PodTemplateSpec) {
		setRolloutAnnotation(tpl, value)
		why = holdRegistrar(tpl, s.d.spec.Registrar, overlapHold)
	})
	if err != nil {
		t.Fatal(err)
	}
	if why != "" {
		return why
	}
	t.Logf("rolling with the new pod's registrar %s held %s after its other containers started (a postStart sleep; restored when the case ends)", s.d.spec.Registrar, overlapHold)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rolloutWait)
		defer cancel()
		was, err := s.podUIDs(cctx)
		if err != nil {
			t.Logf("restore the pod template: %v", err)
			return
		}
		t0 := time.Now()
		if _, err := s.editTemplate(cctx, func(tpl *corev1.PodTemplateSpec) {
			*tpl = *orig.DeepCopy()
			setRolloutAnnotation(tpl, "readiness-restored-"+t0.UTC().Format(time.RFC3339Nano))
		}); err != nil {
			t.Logf("restore the pod template: %v", err)
			return
		}
		if _, err := s.awaitRolledOut(cctx, was, rolloutWait); err != nil {
			t.Logf("restore the pod template: %v", err)
			return
		}
		t.Logf("pod template restored (the registrar no longer held), rolled out in %.1f s", time.Since(t0).Seconds())
	})
	return ""
}

// awaitNewDriver waits for the new pod on node (a pod not in was) whose
// driver serves its CSI socket, and returns it: where verify dials the
// node's sockets, the driver answers GetPluginInfo and NodeGetInfo;
// elsewhere its socket file exists.
func (s *suite) awaitNewDriver(ctx context.Context, node string, was map[types.UID]bool, timeout time.Duration) (*corev1.Pod, error) {
	var found *corev1.Pod
	last := "no new pod yet"
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := s.cl.Client.CoreV1().Pods(s.cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.cl.Selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for i := range l.Items {
			p := &l.Items[i]
			if p.Spec.NodeName != node || was[p.UID] || p.DeletionTimestamp != nil {
				continue
			}
			sock := s.socketFor(p)
			if s.cl.Dialer != nil {
				if _, err := s.askInstance(ctx, node, sock); err != nil {
					last = fmt.Sprintf("new pod %s: its driver does not answer on %s yet: %v", p.Name, sock, err)
					return false, nil
				}
			} else if out, err := s.cl.Node.NodeSh(ctx, node, `[ -S "$1" ] && echo yes; true`, sock); err != nil || out == "" {
				last = fmt.Sprintf("new pod %s: no socket %s yet (%v)", p.Name, sock, err)
				return false, nil
			}
			found = p
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, &VerifyError{Err: fmt.Errorf("the new pod's driver on %s did not serve within %s (the registrar held %s): %w: %s", node, timeout, overlapHold, err, last)}
	}
	return found, nil
}

// registrarStarted reports whether the registrar container of pod has
// started (then the kubelet may call the pod's instance already).
func (s *suite) registrarStarted(ctx context.Context, pod *corev1.Pod) (bool, error) {
	p, err := s.cl.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	st := ContainerStatus(p, s.d.spec.Registrar).State
	return st.Running != nil || st.Terminated != nil, nil
}
