package main

import (
	"slices"
	"testing"
)

func TestApply(t *testing.T) {
	got, err := apply([]string{"PATH=/", "ETCD_NAME=old"}, "# made by etcdmember\nexport ETCD_NAME='10.0.0.1'\n\nETCD_INITIAL_CLUSTER_STATE=new\nexport ETCD_INITIAL_CLUSTER='a=http://a:2380,b=http://b:2380'\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/", "ETCD_NAME=10.0.0.1", "ETCD_INITIAL_CLUSTER_STATE=new", "ETCD_INITIAL_CLUSTER=a=http://a:2380,b=http://b:2380"}
	if !slices.Equal(got, want) {
		t.Fatalf("apply = %q, want %q", got, want)
	}
	for _, bad := range []string{"etcd --name x", "export X='a", "X='a'b'", "=v"} {
		if _, err := apply(nil, bad); err == nil {
			t.Errorf("apply(%q) accepted it", bad)
		}
	}
}
