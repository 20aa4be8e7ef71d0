package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
)

// ?consistent=1 (or X-Rollcall-Consistent: 1) reads at the leader's read
// index: a machine created through one node is in a consistent list read
// at once through every other, with no index passed along; a bad value is
// refused before anything is read.
func TestConsistentRead(t *testing.T) {
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{Name: "cr"})
	admin := nodes[0].Admin
	for i := range 10 {
		writer := nodes[i%3]
		name := fmt.Sprintf("cr-m%d", i)
		mustDo(t, writer, http.StatusCreated, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: name, MAC: fmt.Sprintf("02:00:00:00:10:%02x", i)}, admin)
		for k, reader := range []*nodetest.Node{nodes[(i+1)%3], nodes[(i+2)%3]} {
			path, header := "/api/v1/machines?consistent=1&q="+name, []string(nil)
			if k == 1 {
				path, header = "/api/v1/machines?q="+name, []string{"X-Rollcall-Consistent", "1"}
			}
			r := reader.Do(t, "GET", path, nil, append(nodetest.Bearer(admin), header...)...)
			if r.Status != http.StatusOK {
				t.Fatalf("consistent list: %s", r)
			}
			var l wire.MachineList
			r.Decode(t, &l)
			if len(l.Machines) != 1 || l.Machines[0].Name != name {
				t.Fatalf("a consistent read through another node right after the write of %s lists %d machines", name, len(l.Machines))
			}
		}
	}
	r := nodes[1].Do(t, "GET", "/api/v1/machines?consistent=maybe", nil, nodetest.Bearer(admin)...)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "consistent must be 1 or 0") {
		t.Errorf("consistent=maybe: %s", r)
	}
}
