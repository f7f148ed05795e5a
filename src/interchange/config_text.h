// The config text the importers write (ONNX's ExportFrugalConfig and
// import-mxnet's): one writer for the nodes, the variables, the outputs and
// the data section, each value quoted as the config parser reads it back.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace frugal::interchange {

// "(2,3)", as a variable's shape attribute.
std::string DimsText(const std::vector<int64_t>& dims);

// node { name: N op: OP input: ... attr { key: K value: V } ...EXTRA }
std::string OpNodeText(const std::string& name, const std::string& op, const std::vector<std::string>& inputs,
                       const std::vector<std::pair<std::string, std::string>>& attrs, const std::string& extra = "");

// A variable node of that shape; aux: kind aux (not trained); init: its
// initialiser ("zero", "one"), or none.
std::string VariableText(const std::string& name, const std::vector<int64_t>& dims, bool aux,
                         const std::string& init = "");

// output: REF
std::string OutputText(const std::string& ref);

// The data section: `note` (comment lines, each ending in a newline) above
// it, the data input's and the label's names (none where empty),
// batch_size and sample_shape from `shape` (the batch first; none where it
// is empty), label_shape where label_dims is not empty, with `label_why` as
// its comment.
struct DataText {
  std::string note, data_name, label_name;
  std::vector<int64_t> shape, label_dims;
  std::string label_why;
};
std::string DataSectionText(const DataText& d);

}  // namespace frugal::interchange
