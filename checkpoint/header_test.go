package checkpoint

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/google/go-cmp/cmp"
)

func TestParseHeader(t *testing.T) {
	type result struct {
		Tensors   []TensorInfo
		Metadata  map[string]string
		DataStart int64 // filled in: the data section follows the header
	}
	entry := func(dtype, shape, offs string) string {
		return `{"dtype":` + dtype + `,"shape":` + shape + `,"data_offsets":` + offs + `}`
	}
	one := func(e string) string { return `{"t":` + e + `}` }
	tests := []struct {
		name     string
		file     []byte
		fileSize int64 // 0: len(file)
		want     *result
		problems []string
	}{
		{
			name: "valid, sorted by offset, metadata",
			file: rawFile(`{"b":`+entry(`"F32"`, `[2]`, `[4,12]`)+`,"__metadata__":{"format":"pt"},"a":`+entry(`"BF16"`, `[2,1]`, `[0,4]`)+`}   `, 12),
			want: &result{
				Tensors: []TensorInfo{
					{Name: "a", DType: arch.BF16, Shape: []int64{2, 1}, Begin: 0, End: 4},
					{Name: "b", DType: arch.F32, Shape: []int64{2}, Begin: 4, End: 12},
				},
				Metadata: map[string]string{"format": "pt"},
			},
		},
		{
			name: "empty header",
			file: rawFile(`{}`, 0),
			want: &result{},
		},
		{
			name: "scalar, empty tensor, gaps and trailing bytes, other dtypes",
			file: rawFile(`{"s":`+entry(`"I64"`, `[]`, `[8,16]`)+`,"z":`+entry(`"U8"`, `[0,4]`, `[8,8]`)+
				`,"f8":`+entry(`"F8_E4M3"`, `[3]`, `[16,19]`)+`,"b":`+entry(`"BOOL"`, `[1]`, `[20,21]`)+`,"__metadata__":null}`, 64),
			want: &result{
				Tensors: []TensorInfo{
					{Name: "z", DType: U8, Shape: []int64{0, 4}, Begin: 8, End: 8},
					{Name: "s", DType: arch.I64, Shape: []int64{}, Begin: 8, End: 16},
					{Name: "f8", DType: F8E4M3, Shape: []int64{3}, Begin: 16, End: 19},
					{Name: "b", DType: Bool, Shape: []int64{1}, Begin: 20, End: 21},
				},
			},
		},
		{
			name:     "shorter than the length field",
			file:     []byte{1, 0, 0},
			problems: []string{"file is 3 bytes, too short for the 8-byte header length"},
		},
		{
			name:     "header length too small",
			file:     append([]byte{1, 0, 0, 0, 0, 0, 0, 0}, "{}"...),
			problems: []string{"header length 1 is too small (minimum 2)"},
		},
		{
			name:     "header length over the limit",
			file:     []byte{0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'},
			problems: []string{"header length 9223372036854775808 exceeds the 100 MiB limit"},
		},
		{
			name:     "header length past the end of the file",
			file:     append([]byte{16, 0, 0, 0, 0, 0, 0, 0}, "{}"...),
			problems: []string{"truncated: header needs 24 bytes, file has 10"},
		},
		{
			name:     "header beyond the bytes given",
			file:     append([]byte{16, 0, 0, 0, 0, 0, 0, 0}, "{}"...),
			fileSize: 1000,
			problems: []string{"header needs 24 bytes, only 10 given"},
		},
		{
			name:     "invalid UTF-8",
			file:     rawFile("{\"\xff\":{}}", 0),
			problems: []string{"header: not valid UTF-8"},
		},
		{
			name:     "bad JSON",
			file:     rawFile(`{"t":`, 0),
			problems: []string{"header: not valid JSON: unexpected EOF"},
		},
		{
			name:     "NaN",
			file:     rawFile(one(entry(`"F32"`, `[NaN]`, `[0,4]`)), 4),
			problems: []string{"header: not valid JSON at byte 28: invalid character 'N' looking for beginning of value"},
		},
		{
			name:     "not an object",
			file:     rawFile(`[{}]`, 0),
			problems: []string{"header: not a JSON object"},
		},
		{
			name:     "trailing data",
			file:     rawFile(`{} {}`, 0),
			problems: []string{"header: not valid JSON: trailing data after the object"},
		},
		{
			name:     "duplicate tensor",
			file:     rawFile(`{"t":`+entry(`"U8"`, `[1]`, `[0,1]`)+`,"t":`+entry(`"U8"`, `[1]`, `[1,2]`)+`}`, 2),
			problems: []string{`header: duplicate key "t"`},
		},
		{
			name:     "duplicate field",
			file:     rawFile(`{"t":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}`, 1),
			problems: []string{`tensor t: duplicate key "dtype"`},
		},
		{
			name:     "entry not an object",
			file:     rawFile(`{"t":[1]}`, 0),
			problems: []string{"tensor t: not a JSON object"},
		},
		{
			name:     "fields missing",
			file:     rawFile(`{"t":{}}`, 0),
			problems: []string{"tensor t: dtype missing", "tensor t: shape missing", "tensor t: data_offsets missing"},
		},
		{
			name:     "dtype null",
			file:     rawFile(one(entry(`null`, `[1]`, `[0,1]`)), 1),
			problems: []string{"tensor t: dtype: not a string"},
		},
		{
			name:     "unknown dtype",
			file:     rawFile(one(entry(`"Q4_K"`, `[1]`, `[0,1]`)), 1),
			problems: []string{`tensor t: unsupported dtype "Q4_K"`},
		},
		{
			name:     "sub-byte dtype",
			file:     rawFile(one(entry(`"F4"`, `[2]`, `[0,1]`)), 1),
			problems: []string{`tensor t: unsupported dtype "F4"`},
		},
		{
			name:     "shape null",
			file:     rawFile(one(entry(`"U8"`, `null`, `[0,1]`)), 1),
			problems: []string{"tensor t: shape: not a list"},
		},
		{
			name: "shape entries not non-negative integers",
			file: rawFile(one(entry(`"U8"`, `[-1, 1.5, 1e3, "2", 1.0, 99999999999999999999, true]`, `[0,1]`)), 1),
			problems: []string{
				"tensor t: shape[0]: negative (-1)",
				"tensor t: shape[1]: not an integer (1.5)",
				"tensor t: shape[2]: not an integer (1e3)",
				`tensor t: shape[3]: not an integer ("2")`,
				"tensor t: shape[4]: not an integer (1.0)",
				"tensor t: shape[5]: too large (99999999999999999999)",
				"tensor t: shape[6]: not an integer (true)",
			},
		},
		{
			name:     "offsets not integers",
			file:     rawFile(one(entry(`"U8"`, `[1]`, `[0.0,-1]`)), 1),
			problems: []string{"tensor t: data_offsets[0]: not an integer (0.0)", "tensor t: data_offsets[1]: negative (-1)"},
		},
		{
			name:     "offsets not a pair",
			file:     rawFile(one(entry(`"U8"`, `[1]`, `[0,1,2]`)), 2),
			problems: []string{"tensor t: data_offsets: want [begin, end], got 3 numbers"},
		},
		{
			name:     "begin after end",
			file:     rawFile(one(entry(`"U8"`, `[0]`, `[2,1]`)), 2),
			problems: []string{"tensor t: data_offsets [2 1]: begin after end"},
		},
		{
			name:     "shape times dtype size differs from the range",
			file:     rawFile(one(entry(`"BF16"`, `[3,2]`, `[0,6]`)), 12),
			problems: []string{"tensor t: data_offsets [0 6] hold 6 bytes, shape [3 2] of BF16 needs 12"},
		},
		{
			name:     "byte size overflows",
			file:     rawFile(one(entry(`"F32"`, `[4611686018427387904,2]`, `[0,8]`)), 8),
			problems: []string{"tensor t: shape [4611686018427387904 2] of F32: byte size overflows int64"},
		},
		{
			name: "zero dimension beats overflow",
			file: rawFile(one(entry(`"F64"`, `[9223372036854775807,9223372036854775807,0]`, `[0,0]`)), 0),
			want: &result{Tensors: []TensorInfo{{Name: "t", DType: F64, Shape: []int64{9223372036854775807, 9223372036854775807, 0}}}},
		},
		{
			name:     "range outside the file",
			file:     rawFile(`{"a":`+entry(`"U8"`, `[4]`, `[0,4]`)+`,"b":`+entry(`"U8"`, `[4]`, `[9223372036854775803,9223372036854775807]`)+`}`, 4),
			problems: []string{"truncated: data section needs 9223372036854775807 bytes, file has 4"},
		},
		{
			name: "overlapping ranges",
			file: rawFile(`{"a":`+entry(`"U8"`, `[4]`, `[0,4]`)+`,"b":`+entry(`"U8"`, `[4]`, `[2,6]`)+
				`,"c":`+entry(`"U8"`, `[1]`, `[3,4]`)+`,"d":`+entry(`"U8"`, `[2]`, `[6,8]`)+`}`, 8),
			problems: []string{
				"tensor b: data_offsets [2 6] overlap tensor a [0 4]",
				"tensor c: data_offsets [3 4] overlap tensor b [2 6]",
			},
		},
		{
			name:     "metadata not an object",
			file:     rawFile(`{"__metadata__":[]}`, 0),
			problems: []string{"__metadata__: not a JSON object"},
		},
		{
			name:     "metadata value not a string",
			file:     rawFile(`{"__metadata__":{"a":"x","n":1,"o":{}}}`, 0),
			problems: []string{`__metadata__: value of "n" is not a string`, `__metadata__: value of "o" is not a string`},
		},
		{
			name:     "odd names shown quoted",
			file:     rawFile(`{"":`+entry(`"U8"`, `[1]`, `[0,1]`)+`,"a b\n":`+entry(`"X"`, `[1]`, `[1,2]`)+`}`, 2),
			problems: []string{`tensor "": empty name`, `tensor "a b\n": unsupported dtype "X"`},
		},
		{
			name: "every bad entry reported",
			file: rawFile(`{"a":`+entry(`"U8"`, `[2]`, `[0,1]`)+`,"b":`+entry(`"U8"`, `[1]`, `[1,2]`)+`,"c":`+entry(`"I9"`, `[1]`, `[2,3]`)+`}`, 3),
			problems: []string{
				"tensor a: data_offsets [0 1] hold 1 bytes, shape [2] of U8 needs 2",
				`tensor c: unsupported dtype "I9"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := tt.fileSize
			if size == 0 {
				size = int64(len(tt.file))
			}
			tensors, meta, start, err := ParseHeader(tt.file, size)
			var problems []string
			if err != nil {
				problems = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tt.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if tt.want != nil {
				tt.want.DataStart = 8 + int64(binary.LittleEndian.Uint64(tt.file))
				got := &result{tensors, meta, start}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			}
		})
	}
}
