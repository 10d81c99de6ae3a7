// Package shard decides which member of a group of processes owns each
// object: sticky, bounded-load rendezvous hashing. It is a pure function
// of its inputs, so every member that reads the same members and owners
// computes the same assignment without talking to the others.
//
// The rule, in order:
//   - Quotas: with n objects and m members, every member may hold
//     floor(n/m) objects, and n mod m of them one more. Those "ceil"
//     quotas go first to the members that hold more than floor(n/m) now,
//     so that a balanced assignment keeps its shape, then to the others;
//     by member name within each (see quotas for why not by load).
//   - Sticky: an object whose current owner is a member stays with it,
//     unless the owner holds more than its quota; an over-quota owner keeps
//     the objects that rank highest for it by rendezvous score and sheds the
//     rest.
//   - Orphans (objects with no live owner, and shed ones) go, in order of
//     name, each to the member under quota that ranks highest for it.
//
// Hence: loads differ by at most one; from a balanced assignment a member
// leaving moves exactly its objects, and a member joining moves at most
// ceil(n/(m+1)) of them (to itself); adding or removing one object moves at
// most one other.
package shard

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Assign returns the owner of every object: a member, or nothing at all
// when members is empty. current is who owns what now (object -> member);
// entries that name an object not in objects or a member not in members
// are ignored. Duplicates in objects or members count once; their order
// does not matter.
func Assign(objects []string, members []string, current map[string]string) map[string]string {
	objs := sortedSet(objects)
	mems := sortedSet(members)
	out := make(map[string]string, len(objs))
	if len(mems) == 0 {
		return out
	}
	isMember := make(map[string]bool, len(mems))
	for _, m := range mems {
		isMember[m] = true
	}

	// What each member holds now, among the objects asked about.
	held := make(map[string][]string, len(mems))
	var orphans []string
	for _, o := range objs {
		if owner, ok := current[o]; ok && isMember[owner] {
			held[owner] = append(held[owner], o)
		} else {
			orphans = append(orphans, o)
		}
	}

	quota := quotas(len(objs), mems, held)
	for _, m := range mems {
		keep := held[m]
		if len(keep) > quota[m] {
			// Keep the objects that rank highest for m; shed the rest.
			slices.SortFunc(keep, func(a, b string) int { return cmp.Compare(score(b, m), score(a, m)) })
			orphans = append(orphans, keep[quota[m]:]...)
			keep = keep[:quota[m]]
		}
		for _, o := range keep {
			out[o] = m
		}
		quota[m] -= len(keep)
	}

	slices.Sort(orphans)
	for _, o := range orphans {
		best, bestScore := "", uint64(0)
		for _, m := range mems {
			if quota[m] == 0 {
				continue
			}
			if s := score(o, m); best == "" || s > bestScore {
				best, bestScore = m, s
			}
		}
		out[o] = best
		quota[best]--
	}
	return out
}

// quotas is how many of n objects each member may hold: n/m each, and one
// more for n%m of them — first the members that hold more than n/m now,
// then the others, each kind in name order (mems is sorted).
//
// Beyond that one distinction the ranking ignores loads, because loads
// change while the members act concurrently, each from its own view: as
// members shed down to their quotas or fill up to them, a ranking by load
// could move the extra quota from one member to another that had already
// shed or filled to its own, which would then move one more object. A
// member holding more than n/m stays so while it sheds only if it keeps
// the extra quota, and a member reaches n/m+1 only with it.
func quotas(n int, mems []string, held map[string][]string) map[string]int {
	m := len(mems)
	floor := n / m
	above := func(mem string) int {
		if len(held[mem]) > floor {
			return 1
		}
		return 0
	}
	byLoad := slices.Clone(mems)
	slices.SortStableFunc(byLoad, func(a, b string) int { return cmp.Compare(above(b), above(a)) })
	q := make(map[string]int, m)
	for i, mem := range byLoad {
		q[mem] = floor
		if i < n%m {
			q[mem]++
		}
	}
	return q
}

// Moves counts the objects that both assignments place, on different
// members. Objects only one of them places (added or removed) are not
// moves.
func Moves(before, after map[string]string) int {
	n := 0
	for o, a := range after {
		if b, ok := before[o]; ok && b != a {
			n++
		}
	}
	return n
}

// score is the rendezvous weight of object for member: the member with the
// highest score is the object's first choice.
//
// It is FNV-1a 64 (hash/fnv) of object, a zero byte and member, passed
// through the 64-bit finaliser of MurmurHash3 (fmix64). FNV-1a is in the
// standard library and its output is fixed by its definition, so every
// process and every version computes the same scores — hash/maphash, being
// seeded per process, could not serve. FNV-1a alone mixes its last bytes
// poorly (names that differ in their last character get close hashes, and
// the scores of one object for members "w1", "w2" would be correlated);
// fmix64 spreads every input bit over the whole word.
func score(object, member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(object))
	h.Write([]byte{0})
	h.Write([]byte(member))
	return fmix64(h.Sum64())
}

// fmix64 is MurmurHash3's finaliser: an avalanche of all 64 bits.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// sortedSet is s sorted, without duplicates (a new slice).
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
