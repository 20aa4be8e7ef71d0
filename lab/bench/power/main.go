// Command power measures Rollcall's power drivers against the reference's
// way in one run on this machine, and prints the ratios:
//
//   - IPMI: N power-status calls spread over B simulated BMCs (go-ipmi's
//     BMC server in-process on loopback, lanplus, cipher suite 17): the ipmi
//     driver vs `ipmitool` run once per call (one process per call, as the
//     reference shells out).
//
//   - Redfish: the same calls over B fake Redfish services (the DMTF
//     public-rackmount1 mockup over HTTPS): one driver per BMC keeping its
//     session vs a fresh driver (new TLS connection, login, logout) per call.
//
//     go run ./lab/bench/power -n 1000 -bmcs 100 -p 1
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/ipmi"
	"github.com/rollcall/rollcall/power/ipmi/ipmitest"
	"github.com/rollcall/rollcall/power/redfish"
	"github.com/rollcall/rollcall/power/redfish/redfishtest"
)

func main() {
	n := flag.Int("n", 1000, "power-status calls per run")
	bmcs := flag.Int("bmcs", 100, "simulated BMCs")
	par := flag.Int("p", 1, "calls in flight at once (both sides)")
	flag.Parse()

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "run\tcalls\tbmcs\tin flight\twall\twall per call\terrors\n")
	row := func(name string, d time.Duration, errs int64) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\t%d\n", name, *n, *bmcs, *par, d.Round(time.Millisecond), (d / time.Duration(*n)).Round(time.Microsecond), errs)
	}

	// IPMI.
	sims := make([]*ipmitest.BMC, *bmcs)
	for i := range sims {
		b, err := ipmitest.Start("admin", "secret", types.CipherSuiteID17, types.CipherSuiteID3)
		if err != nil {
			log.Fatal(err)
		}
		defer b.Close()
		sims[i] = b
	}
	drivers := make([]power.Driver, *bmcs)
	for i, b := range sims {
		d, err := ipmi.New(power.Target{Address: b.Address(), User: "admin", Password: "secret", Settings: map[string]string{"cipher": "17"}}, nil)
		if err != nil {
			log.Fatal(err)
		}
		drivers[i] = d
	}
	ours, oursErr := run(*n, *par, func(ctx context.Context, i int) error {
		_, err := drivers[i%*bmcs].Status(ctx)
		return err
	})
	row("ipmi: rollcall driver", ours, oursErr)
	var tool time.Duration
	if _, err := exec.LookPath("ipmitool"); err != nil {
		fmt.Fprintf(w, "ipmi: ipmitool per call\t-\t-\t-\tskipped: ipmitool not installed\t\t\n")
	} else {
		var toolErr int64
		tool, toolErr = run(*n, *par, func(ctx context.Context, i int) error {
			b := sims[i%*bmcs]
			out, err := exec.CommandContext(ctx, "ipmitool", "-I", "lanplus", "-C", "17", "-H", "127.0.0.1",
				"-p", strconv.Itoa(b.Addr.Port), "-U", "admin", "-P", "secret", "chassis", "power", "status").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
		row("ipmi: ipmitool per call", tool, toolErr)
	}

	// Redfish.
	mock, err := redfishtest.MockupDir("public-rackmount1")
	if err != nil {
		log.Fatal(err)
	}
	fakes := make([]*redfishtest.Server, *bmcs)
	pins := make([]string, *bmcs)
	rfDrivers := make([]*redfish.Driver, *bmcs)
	for i := range fakes {
		s, err := redfishtest.New(redfishtest.Config{Mockup: mock})
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		fakes[i] = s
		pins[i], err = power.FetchCertificate(context.Background(), s.URL())
		if err != nil {
			log.Fatal(err)
		}
		rfDrivers[i], err = redfish.New(power.Target{Address: s.URL(), User: "admin", Password: "secret", PinnedCertSHA256: pins[i]}, redfish.Standard, redfish.Options{}, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer rfDrivers[i].Close()
	}
	reuse, reuseErr := run(*n, *par, func(ctx context.Context, i int) error {
		_, err := rfDrivers[i%*bmcs].Status(ctx)
		return err
	})
	row("redfish: session reused", reuse, reuseErr)
	fresh, freshErr := run(*n, *par, func(ctx context.Context, i int) error {
		s := fakes[i%*bmcs]
		d, err := redfish.New(power.Target{Address: s.URL(), User: "admin", Password: "secret", PinnedCertSHA256: pins[i%*bmcs]}, redfish.Standard, redfish.Options{}, nil)
		if err != nil {
			return err
		}
		defer d.Close()
		_, err = d.Status(ctx)
		return err
	})
	row("redfish: fresh session per call", fresh, freshErr)
	w.Flush()

	fmt.Println()
	if tool > 0 {
		fmt.Printf("ipmi: rollcall is %.1fx faster than ipmitool per call (ipmitool wall / rollcall wall)\n", float64(tool)/float64(ours))
	}
	fmt.Printf("redfish: a reused session is %.1fx faster than a fresh session per call\n", float64(fresh)/float64(reuse))
}

// run makes n calls with p in flight and returns the wall time and the
// number of failed calls.
func run(n, p int, call func(ctx context.Context, i int) error) (time.Duration, int64) {
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	start := time.Now()
	for range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := call(ctx, i); err != nil {
					errs.Add(1)
					once.Do(func() { log.Printf("first error: %v", err) })
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	return time.Since(start), errs.Load()
}
