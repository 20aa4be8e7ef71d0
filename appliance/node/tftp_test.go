package node_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	tftpclient "github.com/pin/tftp/v3"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/raftfsm/cluster"
)

// A node started with -tftp serves the iPXE binaries of its ipxe_dir and
// nothing else (the tftp package's own tests cover the protocol).
func TestNodeServesTFTP(t *testing.T) {
	data := t.TempDir()
	ipxe := filepath.Join(data, "ipxe")
	os.MkdirAll(ipxe, 0o755)
	want := bytes.Repeat([]byte("EFI-binary."), 4000)
	os.WriteFile(filepath.Join(ipxe, "ipxe.efi"), want, 0o644)
	os.WriteFile(filepath.Join(ipxe, "secret.txt"), []byte("no"), 0o644)
	os.WriteFile(filepath.Join(data, "rollcall.json"), []byte(`{"ipxe_dir":"`+ipxe+`"}`), 0o600)
	n := nodetest.StartWith(t, nodetest.Options{RaftTune: func(*cluster.Config) {}, Node: func(o *node.Options) {
		o.DataDir, o.TFTPAddr = data, "127.0.0.1:0"
	}})
	addrs := n.TFTPAddrs()
	if len(addrs) == 0 {
		t.Fatal("no TFTP listener")
	}
	c, err := tftpclient.NewClient(addrs[0].String())
	if err != nil {
		t.Fatal(err)
	}
	wt, err := c.Receive("ipxe.efi", "octet")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := wt.WriteTo(&got); err != nil || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("ipxe.efi: %v, %d bytes", err, got.Len())
	}
	for _, name := range []string{"secret.txt", "../rollcall.json", "/etc/passwd"} {
		if _, err := c.Receive(name, "octet"); err == nil {
			t.Fatalf("%s was served", name)
		}
	}
}
