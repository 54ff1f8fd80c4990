export default { handle() {} };
