package nodeenv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestParseCmdline(t *testing.T) {
	cases := map[string]struct {
		cmdline string
		want    Config
		bootErr string // "" when CheckBoot passes
	}{
		"the boot answer": {
			cmdline: "BOOT_IMAGE=x console=ttyS0 rollcall.mode=stateless rollcall.server=http://10.0.0.1:8080 rollcall.node=rcn1.m-1.7.abc " +
				"rollcall.root=http://10.0.0.1:8080/images/tiny/squashfs rollcall.root_sha256=" + strings.ToUpper(sum) + " hostname=node001 rollcall.refresh=10",
			want: Config{Server: "http://10.0.0.1:8080", Node: "rcn1.m-1.7.abc", Root: "http://10.0.0.1:8080/images/tiny/squashfs",
				RootSHA256: sum, Hostname: "node001", Refresh: 10},
		},
		"tls and init": {
			cmdline: "rollcall.server=http://h rollcall.tls=https://h:8443 rollcall.ca=" + sum + " rollcall.node=t rollcall.root=http://h/r rollcall.root_sha256=" + sum + " rollcall.init=/bin/sh",
			want:    Config{Server: "http://h", TLS: "https://h:8443", CA: sum, Node: "t", Root: "http://h/r", RootSHA256: sum, Init: "/bin/sh"},
		},
		"nothing": {
			cmdline: "quiet",
			bootErr: "rollcall.server=",
		},
		"no token": {
			cmdline: "rollcall.server=http://h rollcall.root=http://h/r rollcall.root_sha256=" + sum,
			want:    Config{Server: "http://h", Root: "http://h/r", RootSHA256: sum},
			bootErr: "rollcall.node= is missing",
		},
		"short checksum": {
			cmdline: "rollcall.server=http://h rollcall.node=t rollcall.root=http://h/r rollcall.root_sha256=abc",
			want:    Config{Server: "http://h", Node: "t", Root: "http://h/r", RootSHA256: "abc"},
			bootErr: "rollcall.root_sha256=",
		},
		"relative init": {
			cmdline: "rollcall.server=http://h rollcall.node=t rollcall.root=http://h/r rollcall.root_sha256=" + sum + " rollcall.init=sbin/init",
			want:    Config{Server: "http://h", Node: "t", Root: "http://h/r", RootSHA256: sum, Init: "sbin/init"},
			bootErr: "rollcall.init=",
		},
		"tls without pin": {
			cmdline: "rollcall.server=http://h rollcall.tls=https://h rollcall.node=t rollcall.root=http://h/r rollcall.root_sha256=" + sum,
			want:    Config{Server: "http://h", TLS: "https://h", Node: "t", Root: "http://h/r", RootSHA256: sum},
			bootErr: "rollcall.ca=",
		},
		"bad hostname": {
			cmdline: "rollcall.server=http://h rollcall.node=t rollcall.root=http://h/r rollcall.root_sha256=" + sum + " hostname=-x",
			want:    Config{Server: "http://h", Node: "t", Root: "http://h/r", RootSHA256: sum, Hostname: "-x"},
			bootErr: "hostname=",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCmdline(tc.cmdline)
			if err != nil {
				t.Fatalf("ParseCmdline: %v", err)
			}
			if name != "nothing" {
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("config (-want +got):\n%s", d)
				}
			}
			err = got.CheckBoot()
			switch {
			case tc.bootErr == "" && err != nil:
				t.Errorf("CheckBoot: %v", err)
			case tc.bootErr != "" && (err == nil || !strings.Contains(err.Error(), tc.bootErr)):
				t.Errorf("CheckBoot: %v, want an error about %s", err, tc.bootErr)
			}
		})
	}
}

func TestRefreshBounds(t *testing.T) {
	for _, v := range []string{"0", "-1", "x", "86401"} {
		if _, err := ParseCmdline("rollcall.refresh=" + v); err == nil {
			t.Errorf("rollcall.refresh=%s: no error", v)
		}
	}
	if c, err := ParseCmdline("rollcall.refresh=86400"); err != nil || c.Refresh != 86400 {
		t.Errorf("rollcall.refresh=86400: %+v %v", c, err)
	}
}

func TestEnvRoundTrip(t *testing.T) {
	c := Config{Server: "http://10.0.0.1:8080", TLS: "https://10.0.0.1:8443", CA: sum, Node: "rcn1.m-1.7.abc",
		Hostname: "node001", Refresh: 10, Root: "http://x/r", RootSHA256: sum, Init: "/sbin/init"}
	env := c.Env()
	got, err := ParseEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	// The boot-only settings stay out of the file.
	want := Config{Server: c.Server, TLS: c.TLS, CA: c.CA, Node: c.Node, Hostname: c.Hostname, Refresh: c.Refresh}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s\n%s", d, env)
	}
	if strings.Contains(string(env), "rollcall.root") || strings.Contains(string(env), "/r\n") {
		t.Errorf("node.env carries the root:\n%s", env)
	}
	// A value that would need quoting is left out, not written broken.
	if e := (Config{Server: "http://h", Node: "a b$c"}).Env(); strings.Contains(string(e), "ROLLCALL_NODE") {
		t.Errorf("a token with a space was written:\n%s", e)
	}
}

func TestParseEnvErrors(t *testing.T) {
	if _, err := ParseEnv([]byte("ROLLCALL_SERVER=http://h\ngarbage\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("garbage line: %v", err)
	}
	if _, err := ParseEnv([]byte("ROLLCALL_REFRESH=0\n")); err == nil {
		t.Error("refresh 0: no error")
	}
	c, err := ParseEnv([]byte("# c\n\nOTHER=1\nROLLCALL_NODE=\"tok\"\n"))
	if err != nil || c.Node != "tok" {
		t.Errorf("quoted value: %+v %v", c, err)
	}
	if err := c.CheckClient(); err == nil || !strings.Contains(err.Error(), "rollcall.server") {
		t.Errorf("CheckClient without a server: %v", err)
	}
}

func TestValidHostname(t *testing.T) {
	for s, want := range map[string]bool{"node001": true, "n-1.rack3": true, "": false, "a..b": false, "-a": false, "a-": false,
		"a_b": false, strings.Repeat("a", 64): true, strings.Repeat("a", 65): false, "nöde": false} {
		if got := ValidHostname(s); got != want {
			t.Errorf("ValidHostname(%q) = %v, want %v", s, got, want)
		}
	}
}
