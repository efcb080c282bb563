// The text of a record as `walcut dump` prints it: one line of fields per
// record, keys and values escaped so any byte string prints safely. The
// std::string functions are for everything else; the Write* functions are
// the dump hot path's allocation-free versions and write the same bytes.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/record.h"

namespace walfmt {

struct ClusterClock;  // walfmt/duration.h

// One line: the fields of the record, keys and values shortened to
// `max_bytes` each (0 = no limit). Record times print as "time 1234us", or,
// given the cluster's clock, as clock->Format prints them ("time
// 2026-11-30T12:00:00.001234Z"; walfmt/duration.h).
std::string Describe(const Record& r, size_t max_bytes = 32);
void AppendDescription(std::string& out, const Record& r, size_t max_bytes = 32,
                       const ClusterClock* clock = nullptr);

// Escapes a key or value for printing: printable ASCII as is, other bytes
// (and the backslash) as \xNN; longer than max_bytes (0 = no limit) ends in
// "...(+N)".
std::string Printable(std::string_view bytes, size_t max_bytes);
void AppendPrintable(std::string& out, std::string_view bytes, size_t max_bytes);

// The writes of a TX_DATA as Describe prints them, from ParseTxData's views.
void AppendWritesDescription(std::string& out, const std::vector<WriteView>& writes, size_t max_bytes);

// Raw-buffer writers: each writes the same bytes as the Append* function of
// the same name (for TX_PREPARE/COMMIT/ROLLBACK: as AppendDescription of the
// decoded record) at `out` and returns the end. `out` must have room for the
// matching *Bound() bytes; nothing allocates.
size_t PrintableBound(std::string_view bytes, size_t max_bytes);
char* WritePrintable(char* out, std::string_view bytes, size_t max_bytes);
size_t WritesDescriptionBound(std::span<const WriteView> writes, size_t max_bytes);
char* WriteWritesDescription(char* out, std::span<const WriteView> writes, size_t max_bytes);
size_t TxOutcomeDescriptionBound(const TxOutcomeView& v);
char* WriteTxOutcomeDescription(char* out, RecordType type, const TxOutcomeView& v);

}  // namespace walfmt
