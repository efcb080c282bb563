// The scan's table of transactions in flight: TxId -> the position of the
// transaction's first record on the node. The container is walfmt's
// FlatTxMap (walfmt/tx_map.h), which the restore uses too.
#pragma once

#include "walfmt/lsn.h"
#include "walfmt/tx_map.h"

namespace walcut::cut {

using walfmt::FlatTxMap;
using TxTable = FlatTxMap<walfmt::Lsn>;

}  // namespace walcut::cut
