package runtimeapi

import (
	"reflect"
	"testing"
)

// The answers below are HAProxy 2.6's, copied from a running master.
func TestParseProcesses(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Processes
		err  bool
	}{
		{
			name: "fresh",
			in: "#<PID>          <type>          <reloads>       <uptime>        <version>      \n" +
				"32035           master          0 [failed: 0]   0d00h10m12s     2.6.12-1+deb12u4\n" +
				"# workers\n32036           worker          0               0d00h10m12s     2.6.12-1+deb12u4\n# programs\n\n",
			want: Processes{MasterPID: 32035, Workers: []int{32036}},
		},
		{
			name: "after reloads, an old worker finishing",
			in: "#<PID>          <type>          <reloads>       <uptime>        <version>      \n" +
				"15964           master          2 [failed: 1]   0d00h03m14s     2.6.12-1+deb12u4\n" +
				"# workers\n24696           worker          0               0d00h00m02s     2.6.12-1+deb12u4\n" +
				"# old workers\n18645           worker          1               0d00h01m02s     2.6.12-1+deb12u4\n# programs\n\n",
			want: Processes{MasterPID: 15964, Reloads: 2, Failed: 1, Workers: []int{24696}, Old: []int{18645}},
		},
		{name: "not show proc", in: "Unknown command.\n", err: true},
		{name: "empty", in: "", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcesses(tt.in)
			if tt.err {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseServersState(t *testing.T) {
	in := "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n" +
		"3 be_lb1_18080 1 s1 127.0.0.1 2 0 1 1 0 15 3 3 6 0 0 0 - 19001 - 0 0 - - 0\n" +
		"3 be_lb1_18080 2 s2 127.0.0.1 2 4 1 1 31 15 3 3 6 0 0 0 - 19002 - 0 0 - - 0\n" +
		"3 be_lb1_18080 3 s3 0.0.0.0 0 5 1 1 3 1 0 0 14 0 0 0 - 0 - 0 0 - - 0\n\n"
	got, err := ParseServersState(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{
		{Backend: "be_lb1_18080", Name: "s1", Addr: "127.0.0.1", Port: 19001, OpState: OpRunning, AdminState: 0},
		{Backend: "be_lb1_18080", Name: "s2", Addr: "127.0.0.1", Port: 19002, OpState: OpRunning, AdminState: AdminConfigMaint},
		{Backend: "be_lb1_18080", Name: "s3", Addr: "0.0.0.0", Port: 0, OpState: OpStopped, AdminState: AdminForcedMaint | AdminConfigMaint},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// A slot disabled in the configuration and then made ready keeps the
	// configuration bit but takes traffic.
	if !got[1].Up() || got[1].Maint() || got[2].Up() || !got[2].Maint() {
		t.Fatalf("Up/Maint wrong: %+v", got)
	}

	if ss, err := ParseServersState("1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_port\n\n"); err != nil || len(ss) != 0 {
		t.Fatalf("no servers: %v %v", ss, err)
	}
	for _, bad := range []string{"", "Unknown command\n", "1\n3 be 1 s1 127.0.0.1 2 0\n", "1\n# be_name srv_name\nbe s1\n"} {
		if ss, err := ParseServersState(bad); err == nil {
			t.Errorf("%q: want an error, got %+v", bad, ss)
		}
	}
}
