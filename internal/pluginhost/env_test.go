package pluginhost

import "testing"

func TestInheritable(t *testing.T) {
	for _, tc := range []struct {
		extra string
		name  string
		want  bool
	}{
		{"", "PATH", true},
		{"", "HOME", true},
		{"", "TMPDIR", true},
		{"", "LANG", true},
		{"", "LC_ALL", true},
		{"", "TZ", true},
		{"", "INFRAKIT_LOG", true},
		{"", "INFRAKIT_SIMULATOR_DIR", true},
		{"", "INFRAKIT_PROCESS_DIR", true},
		{"", "INFRAKIT_HAPROXY_BIN", true},
		{"", "INFRAKIT_NFS_EXPORTS_FILE", true},
		{"", "INFRAKIT_DOCKER_DIR", true},
		{"", "DOCKER_HOST", true},
		{"", "GOMAXPROCS", true},
		// infrakit's own settings and secrets, and anything unnamed.
		{"", "INFRAKIT_ETCD_PASSWORD", false},
		{"", "INFRAKIT_LOG_PATH", false},
		{"", "INFRAKIT_PLUGIN_PATH", false},
		{"", "INFRAKIT_PROVIDER_ENV", false},
		{"", "AWS_SECRET_ACCESS_KEY", false},
		{"", "PATHX", false},
		{"", "", false},
		// INFRAKIT_PROVIDER_ENV adds names and prefixes.
		{"MYCLOUD_REGION, OTHER", "MYCLOUD_REGION", true},
		{"MYCLOUD_REGION, OTHER", "OTHER", true},
		{"MYCLOUD_REGION, OTHER", "MYCLOUD_TOKEN", false},
		{"MYCLOUD_*", "MYCLOUD_TOKEN", true},
		{"MYCLOUD_* FOO", "FOO", true},
		{"MYCLOUD_*", "MYCLOUD", false},
		{"*", "INFRAKIT_ETCD_PASSWORD", true}, // asked for everything
	} {
		if got := inheritable(tc.extra)(tc.name); got != tc.want {
			t.Errorf("INFRAKIT_PROVIDER_ENV=%q: %s inherited = %v, want %v", tc.extra, tc.name, got, tc.want)
		}
	}
}
