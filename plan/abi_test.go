package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// abiBlock is what a kernel ABI fixes of the parameter block and the
// operand pointers.
type abiBlock struct {
	Slots int
	Slot  map[string]int
	Align int
}

// abis holds every kernel ABI's parameter block. Code objects of an ABI read
// these slots; an engine of the same ABI must write them where they were.
var abis = map[int]abiBlock{
	1: {Slots: 16, Align: 16, Slot: map[string]int{
		"pos": 0, "seed_lo": 1, "seed_hi": 2, "step": 3, "temperature_bits": 4, "top_p_bits": 5, "min_p_bits": 6,
		"top_k": 7, "fill_seed_lo": 8, "fill_seed_hi": 9, "fill_key_lo": 10, "fill_key_hi": 11, "fill_lo": 12,
		"fill_scale": 13, "vocab_limit": 14,
	}},
	// ABI 2: the block grows to 32 slots and holds the step's shape.
	2: {Slots: 32, Align: 16, Slot: map[string]int{
		"pos": 0, "seed_lo": 1, "seed_hi": 2, "step": 3, "temperature_bits": 4, "top_p_bits": 5, "min_p_bits": 6,
		"top_k": 7, "fill_seed_lo": 8, "fill_seed_hi": 9, "fill_key_lo": 10, "fill_key_hi": 11, "fill_lo": 12,
		"fill_scale": 13, "vocab_limit": 14, "n": 15, "last": 16, "row0": 17,
	}},
	// ABI 3: the sample family's mask operand and the masked slot.
	3: {Slots: 32, Align: 16, Slot: map[string]int{
		"pos": 0, "seed_lo": 1, "seed_hi": 2, "step": 3, "temperature_bits": 4, "top_p_bits": 5, "min_p_bits": 6,
		"top_k": 7, "fill_seed_lo": 8, "fill_seed_hi": 9, "fill_key_lo": 10, "fill_key_hi": 11, "fill_lo": 12,
		"fill_scale": 13, "vocab_limit": 14, "n": 15, "last": 16, "row0": 17, "masked": 18,
	}},
	// ABI 4: the same block; every kernel waits for the launch before it
	// (programmatic dependent launch).
	4: {Slots: 32, Align: 16, Slot: map[string]int{
		"pos": 0, "seed_lo": 1, "seed_hi": 2, "step": 3, "temperature_bits": 4, "top_p_bits": 5, "min_p_bits": 6,
		"top_k": 7, "fill_seed_lo": 8, "fill_seed_hi": 9, "fill_key_lo": 10, "fill_key_hi": 11, "fill_lo": 12,
		"fill_scale": 13, "vocab_limit": 14, "n": 15, "last": 16, "row0": 17, "masked": 18,
	}},
	// ABI 5: the same block; a negative row count names the slot holding it
	// (the prefill graphs).
	5: {Slots: 32, Align: 16, Slot: map[string]int{
		"pos": 0, "seed_lo": 1, "seed_hi": 2, "step": 3, "temperature_bits": 4, "top_p_bits": 5, "min_p_bits": 6,
		"top_k": 7, "fill_seed_lo": 8, "fill_seed_hi": 9, "fill_key_lo": 10, "fill_key_hi": 11, "fill_lo": 12,
		"fill_scale": 13, "vocab_limit": 14, "n": 15, "last": 16, "row0": 17, "masked": 18,
	}},
}

// TestKernelABIPinned fails when the parameter block or the alignment rule
// changes under an unchanged plan.KernelABI: such a change breaks every
// bundle of the ABI, so it needs a new ABI number (and an entry here).
func TestKernelABIPinned(t *testing.T) {
	want, ok := abis[plan.KernelABI]
	if !ok {
		t.Fatalf("kernel ABI %d has no pinned parameter block here: add it to abis", plan.KernelABI)
	}
	got := abiBlock{Slots: ir.ParamSlots, Slot: map[string]int{}, Align: plan.ArgAlign}
	for s := ir.Slot(0); s < ir.ParamSlots; s++ {
		if s.Valid() {
			got.Slot[s.String()] = int(s)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kernel ABI %d changed without a new number (-pinned +now); bump plan.KernelABI and pin the new block:\n%s", plan.KernelABI, d)
	}
}
