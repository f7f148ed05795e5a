// The importers' config writer (interchange/config_text.h).
#include "interchange/config_text.h"

#include "frugal/base.h"
#include "frugal/config.h"

namespace frugal::interchange {

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += Fmt(s.empty() ? "" : ",", d);
  return "(" + s + ")";
}

std::string OpNodeText(const std::string& name, const std::string& op, const std::vector<std::string>& inputs,
                       const std::vector<std::pair<std::string, std::string>>& attrs, const std::string& extra) {
  std::string s = "node { name: " + QuoteConfigString(name) + " op: " + QuoteConfigString(op);
  for (const std::string& in : inputs) s += " input: " + QuoteConfigString(in);
  for (const auto& [key, value] : attrs)
    s += " attr { key: " + QuoteConfigString(key) + " value: " + QuoteConfigString(value) + " }";
  return s + extra + " }\n";
}

std::string VariableText(const std::string& name, const std::vector<int64_t>& dims, bool aux, const std::string& init) {
  std::vector<std::pair<std::string, std::string>> attrs = {{"shape", DimsText(dims)}};
  if (aux) attrs.emplace_back("kind", "aux");
  if (!init.empty()) attrs.emplace_back("init", init);
  return OpNodeText(name, "variable", {}, attrs);
}

std::string OutputText(const std::string& ref) { return "output: " + QuoteConfigString(ref) + "\n"; }

std::string DataSectionText(const DataText& d) {
  auto list = [](auto first, auto last) {
    std::string s;
    for (auto it = first; it != last; ++it) s += Fmt(s.empty() ? "" : ", ", *it);
    return "[" + s + "]";
  };
  std::string s = d.note + "data {\n";
  if (!d.data_name.empty()) s += "  data_name: " + QuoteConfigString(d.data_name) + "\n";
  if (!d.label_name.empty()) s += "  label_name: " + QuoteConfigString(d.label_name) + "\n";
  if (!d.shape.empty()) {
    if (d.shape[0] > 0) s += Fmt("  batch_size: ", d.shape[0], "\n");
    s += "  sample_shape: " + list(d.shape.begin() + 1, d.shape.end()) + "\n";
  }
  if (!d.label_dims.empty())
    s += "  label_shape: " + list(d.label_dims.begin(), d.label_dims.end()) + "  # " + d.label_why + "\n";
  return s + "}\n";
}

}  // namespace frugal::interchange
