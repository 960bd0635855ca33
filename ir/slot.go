package ir

import "fmt"

// Slot indexes the device-resident parameter block: int32 slots that
// kernels read at run time instead of taking the values as launch
// arguments, so a captured decode graph stays valid while they change.
// Floats are stored as their IEEE-754 bits. Every GPU kernel takes a
// pointer to the block as its last argument (codegen's ABI); a family reads
// the slots its declaration lists (Family.Slots), and the runtime writes
// the block from one array (runtime.Params) on every backend.
type Slot int

const (
	ParamPos Slot = 0 // pos: absolute position of the launch's row 0
	// The sampling slots, read by sample (kernels.Sample).
	ParamSeedLo      Slot = 1 // seed_lo: sampling seed, low 32 bits
	ParamSeedHi      Slot = 2 // seed_hi: sampling seed, high 32 bits
	ParamStep        Slot = 3 // step: sampling step: draws differ per step under one seed
	ParamTemperature Slot = 4 // temperature_bits: float bits; 0 means greedy
	ParamTopP        Slot = 5 // top_p_bits: float bits; a nucleus cut when in (0, 1)
	ParamMinP        Slot = 6 // min_p_bits: float bits; a cut when in (0, 1]
	ParamTopK        Slot = 7 // top_k: 0 means no top-k limit
	// The fill slots, read by fill_uniform (runtime.SyntheticWeights sets
	// them before each weight buffer's fill): value i of the buffer is
	// kernels.FillUniform(seed, key, i, lo, scale).
	ParamFillSeedLo Slot = 8  // fill_seed_lo: generator seed, low 32 bits
	ParamFillSeedHi Slot = 9  // fill_seed_hi: generator seed, high 32 bits
	ParamFillKeyLo  Slot = 10 // fill_key_lo: buffer key (kernels.FillKey), low 32 bits
	ParamFillKeyHi  Slot = 11 // fill_key_hi: buffer key, high 32 bits
	ParamFillLo     Slot = 12 // fill_lo: float bits of the lower bound
	ParamFillScale  Slot = 13 // fill_scale: float bits of hi - lo
	// ParamVocabLimit (vocab_limit, read by sample): ids at or above it
	// are never sampled nor counted in the logprob (the vocabulary's
	// padding rows); 0 means no limit.
	ParamVocabLimit Slot = 14
	// The step's shape: logical rows, the last logical row, and the first
	// stored hidden row of the logits pass. The engine sets them with the
	// rest of the block; launches take their row count and dynamic operand
	// offsets from them.
	ParamN    Slot = 15 // n: logical rows of the launch
	ParamLast Slot = 16 // last: n - 1, the row the LM head reads
	ParamRow0 Slot = 17 // row0: first hidden row of the logits pass
	// ParamMasked (masked, read by sample): 1 when the sample op's mask
	// operand restricts the draw (constrained decoding), 0 for none.
	ParamMasked Slot = 18
	// ParamSlots is the block's size in slots (128 bytes), with room to grow.
	ParamSlots = 32
)

// slotNames are the slots' names in plans, dumps and rendered kernels.
var slotNames = [ParamSlots]string{
	ParamPos: "pos", ParamSeedLo: "seed_lo", ParamSeedHi: "seed_hi", ParamStep: "step",
	ParamTemperature: "temperature_bits", ParamTopP: "top_p_bits", ParamMinP: "min_p_bits", ParamTopK: "top_k",
	ParamFillSeedLo: "fill_seed_lo", ParamFillSeedHi: "fill_seed_hi", ParamFillKeyLo: "fill_key_lo",
	ParamFillKeyHi: "fill_key_hi", ParamFillLo: "fill_lo", ParamFillScale: "fill_scale",
	ParamVocabLimit: "vocab_limit", ParamN: "n", ParamLast: "last", ParamRow0: "row0", ParamMasked: "masked",
}

// Valid reports whether s is a named slot of the block.
func (s Slot) Valid() bool { return s >= 0 && s < ParamSlots && slotNames[s] != "" }

func (s Slot) String() string {
	if !s.Valid() {
		return fmt.Sprintf("slot%d", int(s))
	}
	return slotNames[s]
}

// SlotNamed returns the slot called name.
func SlotNamed(name string) (Slot, error) {
	for i, n := range slotNames {
		if n != "" && n == name {
			return Slot(i), nil
		}
	}
	return 0, fmt.Errorf("unknown dynamic value %q (not a parameter block slot)", name)
}

// MarshalText writes the slot's name: plans name slots, the names map to
// fixed indices.
func (s Slot) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("slot %d is not a named parameter block slot", int(s))
	}
	return []byte(slotNames[s]), nil
}

func (s *Slot) UnmarshalText(b []byte) error {
	v, err := SlotNamed(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// SlotRef returns a pointer to s, for the optional slot fields of ops and
// launches.
func SlotRef(s Slot) *Slot { return &s }
