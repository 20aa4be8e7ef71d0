package power

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Factory builds a driver for one BMC. It checks the target's settings and
// does not talk to the BMC.
type Factory func(t Target, log *slog.Logger) (Driver, error)

// DriverInfo is one line of `rollcall bmc drivers`.
type DriverInfo struct {
	Name        string
	Description string
}

// Registry maps driver names to factories. Drivers are registered
// explicitly by whoever builds the registry (builtin.NewRegistry registers
// every driver this module ships); nothing registers itself on import.
type Registry struct {
	mu      sync.RWMutex
	entries map[string]entry
	order   []string
}

type entry struct {
	info DriverInfo
	f    Factory
}

// NewEmptyRegistry returns a registry with no drivers.
func NewEmptyRegistry() *Registry {
	return &Registry{entries: map[string]entry{}}
}

// Register adds a driver. A name can be registered once.
func (r *Registry) Register(name, description string, f Factory) error {
	if name == "" || f == nil {
		return fmt.Errorf("register power driver %q: name and factory are required", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.entries[name]; ok {
		return fmt.Errorf("register power driver %q: already registered", name)
	}
	r.entries[name] = entry{info: DriverInfo{Name: name, Description: description}, f: f}
	r.order = append(r.order, name)
	return nil
}

// New builds the named driver for t. An unknown name fails with the list of
// registered names.
func (r *Registry) New(name string, t Target, log *slog.Logger) (Driver, error) {
	r.mu.RLock()
	e, ok := r.entries[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("power driver %q: %w; allowed: %s", name, ErrUnknownDriver, joinStrings(r.Names()))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return e.f(t, log.With("driver", name, "bmc", t.Address))
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.entries[name]
	return ok
}

// Names returns the registered names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// Drivers returns every registered driver with its one-line description, in
// registration order: the answer to `rollcall bmc drivers`.
func (r *Registry) Drivers() []DriverInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]DriverInfo, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.entries[n].info)
	}
	return out
}
