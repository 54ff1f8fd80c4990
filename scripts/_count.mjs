import ts from 'typescript';
const file = process.argv[2];
const program = ts.createProgram([file], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, skipLibCheck: true });
const checker = program.getTypeChecker();
const sf = program.getSourceFile(file);
const exps = checker.getExportsOfModule(checker.getSymbolAtLocation(sf));
const values = [], types = [];
for (const e of exps) { const s = e.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(e) : e; (s.flags & ts.SymbolFlags.Value ? values : types).push(e.name); }
console.log(`${exps.length} names: ${values.length} values, ${types.length} types`);
if (process.argv[3]) console.log('values:', values.sort().join(' '), '\ntypes:', types.sort().join(' '));
