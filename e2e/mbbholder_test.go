package e2e

import "testing"

// mbbSlotHolder names the instance a HAProxy slot pointing at
// 127.0.0.1:port stands for, among the instances the poller has seen, and
// whether that instance is current (live, or its record appeared since the
// poller's first read; isCurrent says which). A port may be handed to a new
// instance once the one holding it is gone, so the slot stands for the
// current holder when there is one, and otherwise for the holder seen last:
// every earlier holder had left the port before it was handed on. Blaming
// every holder instead made a member destroyed long before a violation
// when the member killed by the heal test had inherited its port.
func mbbSlotHolder(port int, seen map[string]*mbbState, isCurrent func(id string) bool) (id string, current bool) {
	newest := -1
	for sid, st := range seen {
		if st.port != port {
			continue
		}
		if isCurrent(sid) {
			return sid, true
		}
		if st.seq > newest {
			id, newest = sid, st.seq
		}
	}
	return id, false
}

func TestMBBSlotHolder(t *testing.T) {
	seen := map[string]*mbbState{
		"old":    {id: "old", port: 21747, seq: 1},
		"killed": {id: "killed", port: 21747, seq: 5},
		"live":   {id: "live", port: 21000, seq: 3},
		"gone":   {id: "gone", port: 21000, seq: 2},
	}
	liveOnly := func(id string) bool { return id == "live" }
	for _, tc := range []struct {
		port        int
		wantID      string
		wantCurrent bool
	}{
		// Both holders of 21747 are gone: the slot stands for the one that
		// got the port last, not for the one that left it long before.
		{21747, "killed", false},
		// A live holder takes the slot, whatever its order.
		{21000, "live", true},
		{21999, "", false},
	} {
		id, current := mbbSlotHolder(tc.port, seen, liveOnly)
		if id != tc.wantID || current != tc.wantCurrent {
			t.Errorf("port %d: got (%q, %v), want (%q, %v)", tc.port, id, current, tc.wantID, tc.wantCurrent)
		}
	}
}
