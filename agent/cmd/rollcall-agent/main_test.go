package main

import (
	"net"
	"testing"

	"github.com/rollcall/rollcall/agent/sysinit"
)

func TestBootMAC(t *testing.T) {
	lease := func(name, mac, ip string) sysinit.Lease {
		hw, _ := net.ParseMAC(mac)
		return sysinit.Lease{Interface: name, MAC: hw, IP: net.ParseIP(ip).To4(), Mask: net.CIDRMask(24, 32)}
	}
	leases := []sysinit.Lease{lease("eno1", "b0:7b:25:d4:6e:10", "10.9.0.5"), lease("ens1f0", "40:a6:b7:3c:1e:a0", "10.1.0.7")}
	for server, want := range map[string]string{
		"http://10.1.0.1:8080":  "40:a6:b7:3c:1e:a0", // the NIC on the appliance's subnet
		"http://192.0.2.1:8080": "b0:7b:25:d4:6e:10", // routed: the first lease
		"http://rollcall.lan":   "b0:7b:25:d4:6e:10",
	} {
		if got := bootMAC(server, leases); got != want {
			t.Errorf("%s: %s, want %s", server, got, want)
		}
	}
	if bootMAC("http://10.1.0.1", nil) != "" {
		t.Error("boot MAC without leases")
	}
}
