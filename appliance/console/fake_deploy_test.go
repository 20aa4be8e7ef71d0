package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The fake fleet's OS catalog: debian-13 with two versions (the newer on
// two of three nodes), rocky-9 pinned; a finished nightly sync.
func (f *fleet) OS(ctx context.Context) (wire.OSList, error) {
	l, err := f.os()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, im := range l.Images {
		if v, ok := f.osCurrent[im.Name]; ok {
			l.Images[i].Current = v
		}
	}
	return l, err
}

// OSSync implements OSActions: a sync that finds a new debian-13.
func (f *fleet) OSSync(_ context.Context, names []string, line func(wire.OSProgress)) ([]wire.OSSyncResult, error) {
	f.mu.Lock()
	f.osCalls = append(f.osCalls, "sync "+strings.Join(names, ","))
	f.mu.Unlock()
	line(wire.OSProgress{Name: "debian-13", Step: "download", State: "running", Bytes: 50, Total: 100})
	return []wire.OSSyncResult{{Name: "debian-13", Action: "new", Version: "20261201-1"}, {Name: "rocky-9", Action: "unchanged"}}, nil
}

// OSPromote implements OSActions.
func (f *fleet) OSPromote(_ context.Context, name, version string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.osCalls = append(f.osCalls, "promote "+name+" "+version)
	if f.osCurrent == nil {
		f.osCurrent = map[string]string{}
	}
	f.osCurrent[name] = version
	return nil
}

func (f *fleet) os() (wire.OSList, error) {
	v := func(version string, nodes ...string) wire.OSVersion {
		return wire.OSVersion{Version: version, Size: 412_000_000, RawSize: 3_221_225_472, SectorSize: 512,
			SHA256: hexSum("zst" + version), RawSHA256: hexSum("raw" + version),
			Upstream: "sha512:" + strings.Repeat("ab", 64), Format: "qcow2", Imported: ago(30 * time.Hour), Nodes: nodes}
	}
	all := []string{"node-1", "node-2", "node-3"}
	return wire.OSList{Index: 90, Nodes: 3, Sources: []string{"debian-13", "rocky-9"},
		Sync: wire.OSSync{Node: "node-1", Started: ago(2 * time.Hour), Finished: ago(2*time.Hour - 3*time.Minute), Timer: true,
			Result: []string{"debian-13: new 20260314-1", "rocky-9: unchanged"}},
		Images: []wire.OSImage{
			{Name: "debian-13", Family: "debian", Current: "20260314-1", Versions: []wire.OSVersion{v("20260301-1", all...), v("20260314-1", "node-1", "node-2")}},
			{Name: "rocky-9", Family: "rhel", Track: "pinned", Current: "9.5-1", Versions: []wire.OSVersion{v("9.5-1", all...)}},
		}}, nil
}

func (f *fleet) DeployJobs(_ context.Context, id string, index uint64, wait time.Duration) (wire.DeployJobList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return wire.DeployJobList{Index: f.index, Jobs: append([]wire.DeployJob(nil), f.deploys[id]...)}, nil
}

// doDeploy plays the API's deploy, release and cancel on machine i; f.mu
// is held.
func (f *fleet) doDeploy(i int, a Action) (string, error) {
	m := &f.machines[i]
	jobs := f.deploys[m.ID]
	switch a.Kind {
	case "deploy":
		if m.State != wire.StateReady {
			return "", fmt.Errorf("machine %s is %s, not ready", nameOf(*m), m.State)
		}
		os, version, _ := strings.Cut(a.Arg, "@")
		if version == "" {
			version = "20260314-1"
		}
		j := wire.DeployJob{ID: fmt.Sprintf("j-%016x", len(f.calls)), Machine: m.ID, Kind: "deploy", OS: os, OSVersion: version, State: "queued",
			Disk:    wire.JobDisk{Name: "sda", Serial: "S455NY0M" + m.Serial, Size: 480_103_981_056, Rule: "the smallest non-removable, writable disk that fits (3.2 GB)"},
			Created: fakeNow, Hostname: nameOf(*m)}
		f.deploys[m.ID] = append([]wire.DeployJob{j}, jobs...)
		m.State = wire.StateDeploying
		f.bump()
		return deployOutcome("deploy", j), nil
	case "release":
		if m.State != wire.StateDeployed && m.State != wire.StateDeployFailed {
			return "", fmt.Errorf("machine %s is %s: only a deployed machine is released", nameOf(*m), m.State)
		}
		j := wire.DeployJob{ID: fmt.Sprintf("j-%016x", len(f.calls)), Machine: m.ID, Kind: "release", Wipe: a.Arg, State: "queued", Created: fakeNow}
		if len(jobs) > 0 {
			j.Disk = jobs[0].Disk
		}
		f.deploys[m.ID] = append([]wire.DeployJob{j}, jobs...)
		m.State = wire.StateReleasing
		f.bump()
		return deployOutcome("release", j), nil
	}
	if len(jobs) == 0 || (jobs[0].State != "queued" && jobs[0].State != "running") {
		return "", errors.New("no deploy or release job is running")
	}
	jobs[0].State = "cancelled"
	m.State = wire.StateReady
	f.bump()
	return deployOutcome("cancel", jobs[0]), nil
}

// report plays the deploy agent's progress on the machine's newest job.
func (f *fleet) report(id string, p wire.JobProgress, steps ...wire.JobStep) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := &f.deploys[id][0]
	j.State, j.Progress, j.Started = "running", p, ago(2*time.Minute)
	j.Steps = append(j.Steps, steps...)
	f.bump()
}

func hexSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
