package ownership

import (
	"cmp"
	"slices"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/shard"
)

// plan is what one balance of member me does, decided from a view (a
// pure function of it: decide). The Balancer carries it out in this
// order: forget the lost, delete the stray keys, give back (Releasing
// first), acquire.
type plan struct {
	// lost: held, but a view read after the acquire shows the key gone or
	// another's: it was deleted underneath; stop acting, delete nothing.
	lost []Object
	// stray: owner keys of me that it does not hold (a release whose
	// delete failed, or a view read before it landed): delete them, or
	// nobody could take those objects until the session ends.
	stray []strayKey
	// release: held, assigned elsewhere (or no longer an object).
	release []Object
	// acquire: assigned to me and free. An object whose key exists is
	// left to its owner to give back, or to its key to expire (its owner
	// may be a member that is gone: nobody acts while its lease is in
	// doubt).
	acquire []Object
}

type strayKey struct {
	object Object
	Owner
}

// decide is the plan of member me, holding held, for objects, from view:
// shard.Assign over the live members, sticky to the owners the view shows
// (and to what me holds but a view read before the acquire does not
// show). Lists are sorted, so the plan is a function of its inputs.
func decide(view View, held map[Object]election.Fence, objects []Object, me string) plan {
	var p plan
	kept := map[Object]election.Fence{}
	for o, f := range held {
		if ow, ok := view.Owners[o]; view.Revision >= f.Revision && (!ok || ow.Fence != f) {
			p.lost = append(p.lost, o)
		} else {
			kept[o] = f
		}
	}
	for o, ow := range view.Owners {
		if _, mine := kept[o]; ow.Member == me && !mine && !slices.Contains(p.lost, o) {
			p.stray = append(p.stray, strayKey{o, ow})
		}
	}

	byName := map[string]Object{}
	for _, o := range objects {
		if o.Valid() == nil {
			byName[o.String()] = o
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	members := make([]string, len(view.Members))
	for i, m := range view.Members {
		members[i] = m.ID
	}
	current := map[string]string{}
	for o, ow := range view.Owners {
		current[o.String()] = ow.Member
	}
	for o := range kept {
		current[o.String()] = me
	}
	target := shard.Assign(names, members, current)

	for o := range kept {
		if target[o.String()] != me {
			p.release = append(p.release, o)
		}
	}
	for name, owner := range target {
		o := byName[name]
		if _, mine := kept[o]; owner != me || mine {
			continue
		}
		if _, taken := view.Owners[o]; !taken {
			p.acquire = append(p.acquire, o)
		}
	}
	slices.SortFunc(p.lost, compareObjects)
	slices.SortFunc(p.stray, func(a, b strayKey) int { return compareObjects(a.object, b.object) })
	slices.SortFunc(p.release, compareObjects)
	slices.SortFunc(p.acquire, compareObjects)
	return p
}

func compareObjects(a, b Object) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
}
