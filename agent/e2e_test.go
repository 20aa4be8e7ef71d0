//go:build agente2e

// The agent against a real appliance: the rollcall binary, built from this
// tree and started with a fresh data directory, serving HTTP and HTTPS. The
// agent runs on fixture trees (not on this machine), pins the cluster CA by
// its fingerprint, and the machine must come out ready with the fixture's
// identity and hardware. A BMC hint for the 2-socket server points at
// go-ipmi's simulated BMC, which the agent verifies out of band.
//
//	go test -tags agente2e -count=1 -run E2E ./agent/
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/bmc"
	"github.com/bougou/go-ipmi/pkg/hal/mock"
	"github.com/bougou/go-ipmi/pkg/server"
	"github.com/bougou/go-ipmi/pkg/transport/udp"
	"github.com/bougou/go-ipmi/pkg/types"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// simBMC starts go-ipmi's BMC with user 2 admin/secret on 127.0.0.1.
func simBMC(t *testing.T) string {
	var guid [16]byte
	b := bmc.New(bmc.DeviceInfo{DeviceID: 0x20, IPMIVersion: 0x20, ManufacturerID: 674}, guid, mock.New(),
		bmc.WithCipherSuites([]types.CipherSuiteID{types.CipherSuiteID3, types.CipherSuiteID17}))
	u, err := b.Users.Add(2, "admin")
	if err != nil {
		t.Fatal(err)
	}
	u.SetPassword([]byte("secret"))
	u.Enabled = true
	u.ChannelAccess[1] = bmc.UserChannelAccess{MaxPrivilege: bmc.PrivilegeLevelAdministrator, Enabled: true}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewServer(b, udp.Wrap(pc))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); _ = srv.Close(); _ = pc.Close() })
	return pc.LocalAddr().String()
}

type appliance struct {
	http, https string
	agentToken  string
	adminToken  string
	caFP        string
}

func startAppliance(t *testing.T, hints map[string]any) *appliance {
	bin := filepath.Join(t.TempDir(), "rollcall")
	build := exec.Command("go", "build", "-o", bin, "./appliance/cmd/rollcall")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build rollcall: %v\n%s", err, out)
	}
	// A node that fails its own bootstrap on a loaded machine (the first
	// election timing out) exits; that is the appliance's business, not
	// the agent's, so it gets one more try with a fresh data directory.
	var lastErr error
	for range 2 {
		a, err := serve(t, bin, hints)
		if err == nil {
			return a
		}
		lastErr = err
		t.Logf("appliance did not come up: %v", err)
	}
	t.Fatal(lastErr)
	return nil
}

func serve(t *testing.T, bin string, hints map[string]any) (*appliance, error) {
	data := t.TempDir()
	conf, _ := json.Marshal(map[string]any{"bmc_hints": hints})
	if err := os.WriteFile(filepath.Join(data, "rollcall.json"), conf, 0o600); err != nil {
		return nil, err
	}
	a := &appliance{
		http:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		https: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
	}
	raft := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	logf, err := os.Create(filepath.Join(data, "serve.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "-data", data, "-http", a.http, "-https", a.https, "-raft", raft)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(data, "serve.log"))
			t.Logf("rollcall serve log:\n%s", b)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(filepath.Join(data, "serve.log"))
			return nil, fmt.Errorf("rollcall serve exited (%v):\n%s", err, b)
		default:
		}
		res, err := http.Get("http://" + a.http + "/api/v1/health")
		if err == nil {
			var h struct{ OK bool }
			_ = json.NewDecoder(res.Body).Decode(&h)
			res.Body.Close()
			if h.OK {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("appliance not healthy after 60 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(data, name))
		return strings.TrimSpace(string(b)), err
	}
	var errs [3]error
	var caPEM string
	a.agentToken, errs[0] = read("agent.token")
	a.adminToken, errs[1] = read("admin.token")
	caPEM, errs[2] = read("tls/ca.pem")
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	block, _ := pem.Decode([]byte(caPEM))
	if block == nil {
		return nil, fmt.Errorf("tls/ca.pem: no certificate")
	}
	sum := sha256.Sum256(block.Bytes)
	a.caFP = hex.EncodeToString(sum[:])
	return a, nil
}

// machineDetail is the part of GET /api/v1/machines/{id} the test reads.
type machineDetail struct {
	State      string   `json:"state"`
	SystemUUID string   `json:"system_uuid"`
	Serial     string   `json:"serial"`
	MACs       []string `json:"macs"`
	Summary    struct {
		Disks, NICs, Sockets, GPUs, DIMMs int
	} `json:"summary"`
	BMC *struct {
		Driver      string   `json:"driver"`
		Address     string   `json:"address"`
		User        string   `json:"user"`
		Source      string   `json:"source"`
		HasPassword bool     `json:"has_password"`
		Errors      []string `json:"errors"`
	} `json:"bmc"`
	Inventory struct {
		Disks []struct{ Name, Serial string }
		NICs  []struct{ Name, MAC string } `json:"nics"`
	} `json:"inventory"`
}

func (a *appliance) machine(t *testing.T, id string) machineDetail {
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.http+"/api/v1/machines/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+a.adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET machine %s: %s", id, res.Status)
	}
	var d machineDetail
	if err := json.NewDecoder(res.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestE2EAgentAgainstAppliance(t *testing.T) {
	bmcAddr := simBMC(t)
	a := startAppliance(t, map[string]any{
		"40:a6:b7:3c:1e:a0": map[string]string{"driver": "ipmi", "address": bmcAddr, "user": "admin", "password": "secret"},
	})
	cases := map[string]struct {
		uuid, serial string
		disks, macs  []string
		sockets      int
		wantBMC      bool
	}{
		"vm": {uuid: "8f0c7a2e-3b1d-4e5f-9a6b-1c2d3e4f5a6b", serial: "RC-VM-0001", disks: []string{"nvme0n1", "vda"},
			macs: []string{"52:54:00:12:34:56", "52:54:00:12:34:57"}, sockets: 1},
		"server2s": {uuid: "4c4c4544-0058-4b10-8032-b7c04f514833", serial: "7XK2QH3", disks: []string{"nvme0n1", "sda", "sdb"},
			macs: []string{"b0:7b:25:d4:6e:10", "b0:7b:25:d4:6e:11", "40:a6:b7:3c:1e:a0", "40:a6:b7:3c:1e:a1"}, sockets: 2, wantBMC: true},
		"gpunode": {uuid: "a8e3b3d2-58c9-11ec-8000-3cecef6a1b2c", serial: "S488372X1A15623", disks: []string{"nvme0n1", "nvme0n2"},
			macs: []string{"3c:ec:ef:6a:1b:2c"}, sockets: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := Run(ctx, Config{
				Server: "http://" + a.http, TLS: "https://" + a.https, CA: a.caFP, Token: a.agentToken,
				Root: filepath.Join("testdata", name), NoPowerOff: true, RetryFor: 30 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commission.State != "ready" || res.Commission.ID != res.Enlist.ID {
				t.Fatalf("enlist %+v, commission %+v", res.Enlist, res.Commission)
			}
			m := a.machine(t, res.Commission.ID)
			if m.State != "ready" || m.SystemUUID != tc.uuid || m.Serial != tc.serial {
				t.Errorf("machine: state %q uuid %q serial %q", m.State, m.SystemUUID, m.Serial)
			}
			var disks []string
			for _, d := range m.Inventory.Disks {
				disks = append(disks, d.Name)
			}
			if !slices.Equal(disks, tc.disks) || m.Summary.Disks != len(tc.disks) {
				t.Errorf("disks %v (summary %d), want %v", disks, m.Summary.Disks, tc.disks)
			}
			var macs []string
			for _, n := range m.Inventory.NICs {
				macs = append(macs, n.MAC)
			}
			slices.Sort(macs)
			want := slices.Sorted(slices.Values(tc.macs))
			if !slices.Equal(macs, want) || m.Summary.NICs != len(tc.macs) {
				t.Errorf("NIC MACs %v (summary %d), want %v", macs, m.Summary.NICs, want)
			}
			if m.Summary.Sockets != tc.sockets {
				t.Errorf("sockets %d, want %d", m.Summary.Sockets, tc.sockets)
			}
			if tc.wantBMC {
				if m.BMC == nil || !m.BMC.HasPassword || m.BMC.Source != "hint" || m.BMC.Address != bmcAddr || m.BMC.User != "admin" || len(m.BMC.Errors) > 0 {
					t.Errorf("bmc %+v, want the verified hint %s", m.BMC, bmcAddr)
				}
			} else if m.BMC != nil {
				t.Errorf("bmc %+v for a machine with neither IPMI device nor hint", m.BMC)
			}
			// A second run without "recommission" is refused: a ready
			// machine is not commissioned again behind the operator's back.
			_, err = Run(ctx, Config{Server: "http://" + a.http, TLS: "https://" + a.https, CA: a.caFP, Token: a.agentToken,
				Root: filepath.Join("testdata", name), NoPowerOff: true, RetryFor: 30 * time.Second, NoBMC: true})
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
				t.Errorf("second run: %v, want 409 from enlist", err)
			}
		})
	}
}

// A wrong fingerprint stops the agent before it sends anything.
func TestE2EWrongCA(t *testing.T) {
	a := startAppliance(t, nil)
	_, err := Run(context.Background(), Config{
		Server: "http://" + a.http, TLS: "https://" + a.https, CA: strings.Repeat("0", 64), Token: a.agentToken,
		Root: filepath.Join("testdata", "vm"), NoPowerOff: true, RetryFor: 5 * time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("err = %v, want a CA mismatch", err)
	}
}
