package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/ownership"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// Scale-out (backend "etcd" { scale_out = true }). Instead of electing
// one leader that acts on everything, every watch process of the stack
// joins an ownership session (package ownership) and acts on its share:
//
//   - The member goroutine (member) joins, runs the Balancer over the
//     stack's groups, ingresses and enrollments, and joins again when its
//     session is lost. The Balancer's hooks hand the loop each object
//     acquired (with its fence) and ask it to stop acting on each object
//     it gives up: the hook returns only once nothing acts on the object
//     any more, and only then is the object's key deleted (owned.go).
//   - Each owned object has its own term: a context cancelled when the
//     object is released or the session is lost, the fence of its lease
//     (every state write for it is conditioned on it), and a gate that,
//     before each provider call, checks that the session stands and the
//     object's key still holds the fence.
//   - The loop passes only the groups it owns (the others are not even
//     listed: that is the point), syncs only the ingresses and
//     enrollments it owns (reading the membership of groups owned
//     elsewhere by listing them, as any sync does), and evaluates the
//     autoscaler of its own groups. A group acquired starts with a fresh
//     self-healing memory, so for one interval it judges no health.
//   - The state lock stays: a pass joins the state lease to act, as in
//     the other modes, so apply and group scale still exclude it. But the
//     other members write the state for their own objects all the time,
//     so a pass is stale only when the desired stack, its lineage, or its
//     own object's record changed since it read them.
//   - Modes never mix: a scale-out watch refuses to start (and a session
//     refuses to act) while a leader key exists, and a leader-mode watch
//     refuses to start, or to act on a won leadership, while members
//     exist.

// ErrOtherMode is matched (errors.Is) by the refusal of a watch whose
// stack runs watch processes of the other mode (scale-out or leader).
var ErrOtherMode = errors.New("watch processes of the other mode run on this stack")

// Key directories under the stack prefix (package ownership's and
// package election's): what the mode checks count.
const (
	membersDir = "/members/"
	leaderDir  = "/leader/"
)

// checkNoOther returns an error matching ErrOtherMode when keys exist
// under the stack prefix's dir (membersDir or leaderDir).
func checkNoOther(ctx context.Context, cl *clientv3.Client, prefix, dir string) error {
	resp, err := cl.Get(ctx, prefix+dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("checking for watch processes of the other mode under %s: %w", prefix+dir, err)
	}
	if resp.Count == 0 {
		return nil
	}
	if dir == leaderDir {
		return fmt.Errorf("%w: a leader-mode infrakit watch (without scale_out) holds %s; stop it, or run every watch of the stack with the same backend block (scale_out = true), then start this one again",
			ErrOtherMode, prefix+dir)
	}
	return fmt.Errorf("%w: %d scale-out infrakit watch process(es) are members under %s; this watch was initialized without scale_out: run \"infrakit init\" with the stack's backend block (scale_out = true), or stop them",
		ErrOtherMode, resp.Count, prefix+dir)
}

// scaleOut is what a watch in scale-out mode adds to the service.
type scaleOut struct {
	backend  *stateetcd.Backend
	identity string
	// acquired and releasing carry the Balancer's hooks to the loop.
	acquired  chan acquiredObj
	releasing chan releaseReq
	// stopped is done once nothing acts any more (the end of Run's
	// shutdown): the hooks stop waiting for the loop then, and the
	// Balancer gives every object back.
	stopped context.Context
	stop    context.CancelFunc

	mu   sync.Mutex
	objs []ownership.Object // the applied stack's objects
	bal  *ownership.Balancer
	sess *ownership.Session
	view ownership.View
	// mine is what the loop acts on (the keys of owned), for the status:
	// the view may still name this member as the owner of an object it
	// has handed over, until the next read of etcd reaches it.
	mine map[ownership.Object]bool

	// Owned by the loop: the objects it acts on, each by its term, and
	// the hooks waiting for an object to be left alone.
	owned   map[ownership.Object]*term
	waiters map[ownership.Object][]chan struct{}
}

// acquiredObj is an object the Balancer acquired, with what its term needs.
type acquiredObj struct {
	obj   ownership.Object
	fence election.Fence
	sess  *ownership.Session
	lease *lease
}

// releaseReq asks the loop to stop acting on obj; done is closed once
// nothing acts on it.
type releaseReq struct {
	obj  ownership.Object
	done chan struct{}
}

func newScaleOut(backend *stateetcd.Backend, identity string) *scaleOut {
	stopped, stop := context.WithCancel(context.Background())
	return &scaleOut{
		backend:   backend,
		identity:  identity,
		acquired:  make(chan acquiredObj),
		releasing: make(chan releaseReq),
		stopped:   stopped,
		stop:      stop,
		owned:     map[ownership.Object]*term{},
		waiters:   map[ownership.Object][]chan struct{}{},
	}
}

// objectsOf are the groups, ingresses and enrollments of doc's stack.
func objectsOf(doc *state.Document) []ownership.Object {
	if doc == nil || doc.Stack == nil {
		return nil
	}
	var out []ownership.Object
	for _, g := range doc.Stack.Groups {
		out = append(out, ownership.Object{Kind: ownership.KindGroup, Name: g.Name})
	}
	for _, in := range doc.Stack.Ingresses {
		out = append(out, ownership.Object{Kind: ownership.KindIngress, Name: in.Name})
	}
	for _, e := range doc.Stack.Enrollments {
		out = append(out, ownership.Object{Kind: ownership.KindEnrollment, Name: e.Name})
	}
	return out
}

// objects is what the Balancer shares out (called from its goroutine).
func (so *scaleOut) objects() []ownership.Object {
	so.mu.Lock()
	defer so.mu.Unlock()
	return slices.Clone(so.objs)
}

// setObjects records the stack's objects and has the Balancer re-balance
// when they changed. It reports whether they did.
func (so *scaleOut) setObjects(objs []ownership.Object) bool {
	so.mu.Lock()
	defer so.mu.Unlock()
	if slices.Equal(objs, so.objs) {
		return false
	}
	so.objs = objs
	if so.bal != nil {
		so.bal.Refresh()
	}
	return true
}

// sendAcquired is the Balancer's Acquired hook.
func (so *scaleOut) sendAcquired(a acquiredObj) {
	select {
	case so.acquired <- a:
	case <-so.stopped.Done():
	}
}

// waitReleased is the Balancer's Releasing hook: it returns once the loop
// no longer acts on o.
func (so *scaleOut) waitReleased(o ownership.Object) {
	done := make(chan struct{})
	select {
	case so.releasing <- releaseReq{obj: o, done: done}:
	case <-so.stopped.Done():
		return
	}
	select {
	case <-done:
	case <-so.stopped.Done():
	}
}

// member joins the stack's scale-out members and runs the Balancer until
// the service has stopped acting (so.stopped), joining again whenever the
// session is lost. It leaves (revoking the session's lease, which deletes
// its keys) once its Balancer has given everything back. Runs in s.bg.
func (s *service) member(ctx context.Context) {
	so := s.so
	log := s.log.Named("scale-out")
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		cl := so.backend.Client()
		sess, err := ownership.Join(ctx, cl, ownership.Options{Prefix: so.backend.Prefix(), TTL: so.backend.LeaseTTL()}, so.identity)
		if err == nil {
			if err = checkNoOther(ctx, cl, so.backend.Prefix(), leaderDir); err != nil {
				s.leave(sess)
				s.rec.Event(status.Event{Kind: status.EventError, Message: "scale-out: not acting: " + err.Error()})
				pause = campaignBackoff
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("joining the stack's watch processes failed; trying again", "error", err)
			sleep(ctx, pause)
			pause = min(2*pause, campaignBackoff)
			continue
		}
		pause = 100 * time.Millisecond
		err = s.runSession(sess)
		s.leave(sess)
		if err == nil {
			return // stopped: everything was given back
		}
		log.Warn("scale-out session lost: stopped acting on its objects; joining again", "member", sess.ID(), "reason", err)
	}
}

// runSession runs one session's Balancer until the service stops acting
// (nil) or the session is lost (its error).
func (s *service) runSession(sess *ownership.Session) error {
	so := s.so
	l := sessionLease(so.backend, sess, s.serials, s.opts.LockTimeout)
	b := ownership.NewBalancer(sess, so.objects, ownership.Hooks{
		Acquired: func(o ownership.Object, f election.Fence) {
			so.sendAcquired(acquiredObj{obj: o, fence: f, sess: sess, lease: l})
		},
		Releasing: so.waitReleased,
	})
	so.mu.Lock()
	so.bal, so.sess = b, sess
	so.mu.Unlock()
	s.log.Named("scale-out").Info("joined the stack's watch processes: acting on this member's share",
		"member", sess.ID(), "identity", so.identity, "lease_ttl", sess.TTL())

	// The status follows the members and owners.
	vctx, vcancel := context.WithCancel(so.stopped)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := range sess.Observe(vctx, 0) {
			so.mu.Lock()
			so.view = v
			so.mu.Unlock()
			s.publishScaleOut()
		}
	}()
	err := b.Run(so.stopped)
	vcancel()
	wg.Wait()
	so.mu.Lock()
	so.bal, so.sess, so.view = nil, nil, ownership.View{}
	so.mu.Unlock()
	s.publishScaleOut()
	return err
}

// sessionLease is the state lease of one session's passes: the state lock
// as in the other modes, each write fenced by the lease of the object it
// is for, network waits ended by the session's loss.
func sessionLease(backend *stateetcd.Backend, sess *ownership.Session, sr *serials, timeout time.Duration) *lease {
	l := newLease(backend, sr, timeout)
	l.term, l.writeTimeout = sess.Context(), sess.TTL()
	l.writeFenced = func(ctx context.Context, doc *state.Document, f election.Fence) error {
		return backend.WriteFenced(ctx, doc, f)
	}
	return l
}

// leave ends sess, waiting for etcd at most one lease TTL.
func (s *service) leave(sess *ownership.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), sess.TTL())
	defer cancel()
	if err := sess.Leave(ctx); err != nil {
		s.log.Named("scale-out").Warn("leaving", "error", err)
	}
}

// publishScaleOut sets the status's scale_out from the last view, the
// stack's objects and what the loop holds.
func (s *service) publishScaleOut() {
	so := s.so
	so.mu.Lock()
	sess, view, objs, mine := so.sess, so.view, so.objs, so.mine
	so.mu.Unlock()
	v := &status.ScaleOut{LeasesHeld: len(mine)}
	me, myIdentity := "", ""
	if sess != nil {
		me, myIdentity = sess.ID(), sess.Identity()
		v.Member = me
	}
	ids := map[string]string{}
	for _, m := range view.Members {
		ids[m.ID] = m.Identity
		v.Members = append(v.Members, status.Member{ID: m.ID, Identity: m.Identity})
	}
	for _, o := range objs {
		ob := status.Object{Kind: o.Kind, Name: o.Name}
		switch ow, ok := view.Owners[o]; {
		case mine[o]:
			ob.Owner, ob.OwnerIdentity, ob.Mine = me, myIdentity, true
		case ok && ow.Member != me:
			ob.Owner, ob.OwnerIdentity = ow.Member, ids[ow.Member]
		}
		v.Objects = append(v.Objects, ob)
	}
	s.rec.SetScaleOut(v)
}
